#!/usr/bin/env bash
# Store Z24's TF bundle, built on the x86-64 workstation (Python 3.11 there, cp312 wheels for the GPU machine),
# from the repo root: TF 2.21.0 and its CUDA 12 libraries unpacked, TF's C++ headers dropped, the four
# stand-in libraries added, one zstd --long archive split into 10 parts of 58 MiB (.tfp/ carries one per
# command), plus dlbench's own dependencies that the GPU image lacks as wheels in .whl/.
set -eu
P="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
   --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
   --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_31_x86_64"
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps $P -d .tfw tensorflow==2.21.0 keras==3.15.1 nvidia-cublas-cu12==12.5.3.2 \
  nvidia-cuda-runtime-cu12==12.5.82 namex optree gast astunparse google-pasta termcolor
rm -rf /tmp/tfroot && mkdir -p /tmp/tfroot/stubs
for w in .tfw/*.whl; do unzip -q -o "$w" -d /tmp/tfroot; done
rm -rf /tmp/tfroot/tensorflow/include /tmp/tfroot/nvidia/*/include
for n in libcufft.so.11 libcusolver.so.11 libcusparse.so.12 libcurand.so.10; do
  echo "" >/tmp/empty.c && gcc -shared -fPIC -Wl,-soname,$n -o /tmp/tfroot/stubs/$n /tmp/empty.c
done
tar cf - -C /tmp tfroot | zstd -T2 -16 --long=27 -q -o /tmp/tf.tar.zst   # 607 MB, about 3 min on 2 cores
mkdir -p /tmp/tfparts && (cd /tmp/tfparts && split -n 10 -d -a 2 /tmp/tf.tar.zst tf.part && sha256sum tf.part* >SHA256SUMS)
# dlbench's dependencies missing from the GPU image (its own numpy, protobuf, requests... are kept);
# antlr4 and pysword are source-only on PyPI: built as wheels here. zstandard unpacks the archive there.
mkdir -p /tmp/deps .whl
# shellcheck disable=SC2086
python3 -m pip download -q $P -d /tmp/deps mlflow-skinny==3.17.2 sqlalchemy alembic pycocotools mlcommons-loadgen==6.0.17 zstandard
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps $P -d /tmp/deps hydra-core==1.3.8 omegaconf==2.3.0 \
  hydra-submitit-launcher==1.2.0 submitit==1.5.4  # (not carried for Z24: every sweep warned of the plugin)
python3 -m pip wheel -q --no-deps -w /tmp/deps antlr4-python3-runtime==4.9.3 pysword==0.2.8
for f in /tmp/deps/*.whl; do
  n=$(basename "$f" | cut -d- -f1 | tr 'A-Z_' 'a-z-')
  case " annotated-doc anyio certifi charset-normalizer click cloudpickle h11 idna markupsafe numpy packaging protobuf pyyaml requests typing-extensions urllib3 zipp " in
    *" $n "*) ;;
    *) cp "$f" .whl/ ;;
  esac
done
