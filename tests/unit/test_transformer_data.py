"""Translation pieces that need no framework: token batching and counting, the corpus layout, the Bible
pairs, the BPE tokenizer, BLEU, the learning-rate schedule and the shared greedy decoding loop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlbench.errors import ConfigError
from dlbench.workloads.translation.bpe import BPE, train_bpe
from dlbench.workloads.translation.eval import corpus_bleu
from dlbench.workloads.translation.parallel_text import (
    APT_INSTALL,
    SWORD_DIR,
    CorpusMissing,
    clean_osis,
    extract_bible,
    read_pairs,
    rows_to_corpus,
    split_rows,
    write_pairs,
)
from dlbench.workloads.translation.token_batches import (
    BUCKET,
    TokenBatches,
    bucket,
    make_batch,
    shapes_first,
    synthetic_pairs,
    target_tokens,
)
from dlbench.workloads.translation.token_batches import bucket_groups as group_by_tokens
from dlbench.workloads.translation.transformer import (
    BOS,
    EOS,
    PAD,
    SIZES,
    forward_flops,
    generated_tokens,
    greedy_decode,
    param_count,
    peak_lr,
    size,
)
from tests.conftest import ROOT

# --- batches and token counts -----------------------------------------------------------------------


def test_batch_adds_bos_eos_pads_right_and_counts_target_tokens_without_padding():
    b = make_batch([([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14])])
    np.testing.assert_array_equal(b.src, [[5, 6, 7, EOS], [10, EOS, PAD, PAD]])
    np.testing.assert_array_equal(b.tgt_in, [[BOS, 8, 9, PAD, PAD], [BOS, 11, 12, 13, 14]])
    np.testing.assert_array_equal(b.labels, [[8, 9, EOS, PAD, PAD], [11, 12, 13, 14, EOS]])
    assert b.target_tokens == (2 + 1) + (4 + 1) == target_tokens(b.labels)
    assert b.labels.size == 10 and b.sentences == 2


def test_bucket_groups_are_whole_batches_of_one_shape_per_bucket_within_the_budget():
    rng = np.random.default_rng(1)
    pairs = synthetic_pairs(2000, 1000, rng, max_len=63)
    src_lens, tgt_lens = [len(s) for s, _ in pairs], [len(t) for _, t in pairs]
    groups = group_by_tokens(src_lens, tgt_lens, 1024)
    used = np.concatenate([g for _, g in groups])
    assert len(set(used.tolist())) == len(used)  # no sentence twice
    for width, g in groups:
        assert width % BUCKET == 0 and len(g) == 1024 // width  # whole batches: n = budget // L
        assert (
            max(max(src_lens[i], tgt_lens[i]) + 1 for i in g)
            <= width
            < min(max(src_lens[i], tgt_lens[i]) + 1 for i in g) + BUCKET
        )
    widths = {w for w, _ in groups}
    assert len(widths) <= 64 // BUCKET
    for width in widths:  # only a bucket's leftover (fewer than one batch) is dropped
        members = [i for i in range(2000) if bucket(max(src_lens[i], tgt_lens[i]) + 1) == width]
        assert len(members) - sum(len(g) for w, g in groups if w == width) < 1024 // width
    # padding stays low: most of each padded target block is real tokens, and every batch has its shape
    batches = [(w, make_batch([pairs[i] for i in g], w)) for w, g in groups]
    assert all(b.src.shape == b.labels.shape == (1024 // w, w) for w, b in batches)
    assert sum(b.target_tokens for _, b in batches) / sum(b.labels.size for _, b in batches) > 0.75


def test_a_sentence_longer_than_the_budget_gets_a_batch_of_its_own():
    groups = group_by_tokens([3, 50, 4], [3, 60, 4], batch_tokens=16)
    assert [(w, g.tolist()) for w, g in groups] == [(8, [0, 2]), (64, [1])]


def test_without_a_token_budget_batches_hold_batch_size_sentences_and_the_tail_is_dropped():
    groups = group_by_tokens([2] * 10, [2] * 10, batch_tokens=0, batch_size=4)
    assert [len(g) for _, g in groups] == [4, 4]
    order = np.random.default_rng(0).permutation(10)  # a seeded order decides who is left over
    assert np.concatenate([g for _, g in group_by_tokens([2] * 10, [2] * 10, 0, 4, order)]).tolist() == (
        order[:8].tolist()
    )


def test_shapes_first_moves_one_batch_of_each_width_to_the_front():
    order = shapes_first([8, 8, 16, 24, 16], np.array([1, 0, 4, 2, 3]))
    assert order.tolist() == [1, 4, 3, 0, 2]


def test_synthetic_lengths_fixed_or_lognormal_and_ids_in_the_vocabulary():
    rng = np.random.default_rng(0)
    fixed = synthetic_pairs(50, 100, rng, length=12)
    assert {len(s) for s, _ in fixed} == {12} == {len(t) for _, t in fixed}
    drawn = synthetic_pairs(4000, 100, rng, max_len=64)
    lens = np.array([len(t) for _, t in drawn])
    assert lens.min() >= 1 and lens.max() <= 64
    assert 22 <= np.median(lens) <= 35  # the measured shape: median 28.5 tokens
    ids = np.concatenate([np.concatenate([s, t]) for s, t in drawn])
    assert ids.min() >= 4 and ids.max() < 100


def test_token_batches_meet_every_shape_first_then_visit_every_batch_per_epoch_in_a_new_order():
    pairs = synthetic_pairs(600, 50, np.random.default_rng(3), max_len=40)
    tb = TokenBatches(pairs, batch_tokens=256, seed=0)
    it = iter(tb)
    first = [next(it) for _ in range(len(tb))]
    second = [next(it) for _ in range(len(tb))]
    shapes = {b.src.shape for b in first}
    assert tb.shapes == len(shapes) >= 3 and {b.src.shape for b in first[: tb.shapes]} == shapes
    total = sum(make_batch([pairs[i] for i in g]).target_tokens for _, g in tb.groups)
    assert sum(b.target_tokens for b in first) == total == sum(b.target_tokens for b in second)
    assert [b.src.shape for b in first] != [b.src.shape for b in second]
    assert {b.src.shape for b in second} == shapes


# --- decoding loop, schedule, counts -----------------------------------------------------------------


def test_greedy_loop_stops_when_every_sentence_ended_and_pads_after_eos():
    script = {0: [7, EOS, 9, 9], 1: [5, 6, 8, EOS], 2: [EOS, 4, 4, 4]}  # sentence -> tokens by step
    seen = []

    def step(prev, t):
        seen.append(prev.copy())
        return np.array([script[i][t] for i in range(3)])

    ids = greedy_decode(step, batch=3, max_len=10)
    np.testing.assert_array_equal(ids, [[7, EOS, PAD, PAD], [5, 6, 8, EOS], [EOS, PAD, PAD, PAD]])
    np.testing.assert_array_equal(seen[0], [BOS] * 3)  # decoding starts from BOS
    np.testing.assert_array_equal(seen[2], [EOS, 6, PAD])  # each step feeds the previous output
    np.testing.assert_array_equal(seen[3], [PAD, 8, PAD])  # then an ended sentence is fed PAD
    assert generated_tokens(ids) == 2 + 4 + 1


def test_checking_for_the_end_less_often_gives_the_same_ids():
    script = {0: [7, EOS, 9, 9, 9, 9, 9], 1: [5, 6, 8, EOS, 9, 9, 9]}
    calls = []

    def step(prev, t):
        calls.append(t)
        return np.array([script[i][t] for i in range(2)])

    every_step = greedy_decode(step, batch=2, max_len=7)
    steps_every = len(calls)
    calls.clear()
    every_third = greedy_decode(step, batch=2, max_len=7, check_every=3)
    np.testing.assert_array_equal(every_third, every_step)  # the extra all-PAD column is cut off
    assert (steps_every, len(calls)) == (4, 6)  # one sync per 3 steps costs up to 2 wasted steps


def test_a_fused_step_that_pads_after_eos_itself_gives_the_same_ids():
    """`fused`: the framework's step applies PAD-after-EOS and returns the done flags (one compiled call
    per position); the loop then only feeds and collects, with the same result."""
    script = {0: [7, EOS, 9, 9], 1: [5, 6, 8, EOS], 2: [EOS, 4, 4, 4]}

    def step(prev, t):
        return np.array([script[i][t] for i in range(3)])

    def fused(prev, done, t):
        ids = np.where(done, PAD, step(prev, t)).astype(np.int32)
        return ids, done | (ids == EOS)

    for every in (1, 3, 0):
        want = greedy_decode(step, batch=3, max_len=4, check_every=every)
        np.testing.assert_array_equal(greedy_decode(fused, 3, 4, check_every=every, fused=True), want)


def test_without_read_back_the_loop_returns_every_column_it_decoded_uncut():
    """read_back=False (every framework's inference step): the ids stay as the framework stacked them,
    one column per position decoded, the PAD columns after every sentence's end not cut."""
    script = {0: [7, EOS, 9, 9, 9], 1: [5, EOS, 8, 8, 8]}

    def step(prev, t):
        return np.array([script[i][t] for i in range(2)])

    uncut = greedy_decode(step, batch=2, max_len=5, check_every=0, read_back=False)
    np.testing.assert_array_equal(uncut, [[7, EOS, PAD, PAD, PAD], [5, EOS, PAD, PAD, PAD]])
    np.testing.assert_array_equal(greedy_decode(step, batch=2, max_len=5, check_every=0), uncut[:, :2])


def test_greedy_loop_stops_at_max_len_without_eos():
    ids = greedy_decode(lambda prev, t: np.full(2, 9), batch=2, max_len=5)
    assert ids.shape == (2, 5) and generated_tokens(ids) == 10


def test_the_task_schedule_is_vaswanis_inverse_sqrt_warm_up():
    """lr * lr_factor(step) of the translation task's optimizer equals eq. 3 of the paper at every step."""
    from dlbench.workloads.translation.spec import TranslationConfig, spec

    opt = spec(TranslationConfig(size="base")).optimizer
    d, w = 512, 4000
    assert (opt.kind, opt.betas, opt.eps, opt.warmup_steps) == ("adam", (0.9, 0.98), 1e-9, w)
    for step in (1, 10, 1000, 3999, 4000, 4001, 20000, 100000):
        vaswani = d**-0.5 * min(step**-0.5, step * w**-1.5)
        assert opt.lr * opt.lr_factor(step - 1) == pytest.approx(vaswani, rel=1e-9), step
    assert peak_lr(512) == pytest.approx(7.0e-4, rel=0.01)


def test_sizes_and_counts():
    assert param_count(SIZES["base"]) == 60_522_496
    assert param_count(size("base", vocab=8000)) == 60_522_496 - 24_000 * 512
    big = SIZES["big"]
    assert (big.d_model, big.heads, big.ffn) == (1024, 16, 4096)
    tiny = SIZES["tiny"]
    assert (tiny.d_model, tiny.heads, tiny.ffn, tiny.encoder_layers, tiny.decoder_layers) == (
        128,
        4,
        512,
        2,
        2,
    )
    base = SIZES["base"]
    assert forward_flops(base, 4, 30, 30) == 4 * forward_flops(base, 1, 30, 30)
    assert forward_flops(base, 1, 30, 31) > forward_flops(base, 1, 30, 30)
    with pytest.raises(ValueError, match="model.size=huge: choose one of tiny, base, big"):
        size("huge")


# --- corpus layout, Bible pairs, BPE, BLEU ---------------------------------------------------------

_WORDS_ES = [
    "el",
    "la",
    "los",
    "casa",
    "perro",
    "gato",
    "agua",
    "pan",
    "sol",
    "luna",
    "rio",
    "mar",
    "bueno",
    "grande",
    "come",
    "bebe",
    "ve",
    "tiene",
]
_WORDS_EN = [
    "the",
    "the",
    "the",
    "house",
    "dog",
    "cat",
    "water",
    "bread",
    "sun",
    "moon",
    "river",
    "sea",
    "good",
    "big",
    "eats",
    "drinks",
    "sees",
    "has",
]


def _generated_corpus(root: Path, n: int = 400) -> list[tuple[str, str]]:
    """A word-for-word 'translation' corpus in the two-file layout (es -> en), deterministic."""
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(n):
        idx = rng.integers(0, len(_WORDS_ES), rng.integers(3, 9))
        pairs.append((" ".join(_WORDS_ES[i] for i in idx) + ".", " ".join(_WORDS_EN[i] for i in idx) + "."))
    write_pairs(root, pairs[:-20], "es", "en", "train")
    write_pairs(root, pairs[-20:], "es", "en", "valid")
    return pairs


def test_two_file_corpus_reads_back_aligned(tmp_path):
    pairs = _generated_corpus(tmp_path)
    assert read_pairs(tmp_path, "es", "en", "valid") == pairs[-20:]
    assert read_pairs(tmp_path, "es", "en", "train", limit=5) == pairs[:5]


def test_missing_corpus_is_one_line_naming_the_files(tmp_path):
    with pytest.raises(CorpusMissing) as err:
        read_pairs(tmp_path / "nowhere", "de", "en")
    msg = str(err.value)
    assert "\n" not in msg and "train.de" in msg and "train.en" in msg and "prepare_translation.py" in msg


def test_misaligned_corpus_is_one_line(tmp_path):
    (tmp_path / "train.es").write_text("a\nb\n")
    (tmp_path / "train.en").write_text("a\n")
    with pytest.raises(ConfigError, match="train.es has 2 lines but train.en has 1"):
        read_pairs(tmp_path, "es", "en")


def test_missing_sword_modules_give_the_apt_command(tmp_path):
    (tmp_path / "mods.d").mkdir()
    with pytest.raises(CorpusMissing) as err:
        extract_bible(tmp_path)
    assert APT_INSTALL in str(err.value) and "\n" not in str(err.value)
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "datasets" / "prepare_translation.py"), "--out", str(tmp_path / "o"),
         "--sword-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and APT_INSTALL in res.stderr and "Traceback" not in res.stderr


def test_osis_cleaning_drops_footnotes_without_gluing_words():
    raw = (
        '<w lemma="strong:H0430">God</w><note placement="foot"><reference>1:1 </reference>The Hebrew '
        "word.</note><w>created</w> the earth<note>x</note>. &amp; more"
    )
    assert clean_osis(raw) == "God created the earth. & more"


def test_held_out_pairs_are_spread_and_disjoint():
    rows = [(str(i), f"es{i}", f"en{i}") for i in range(1000)]
    parts = split_rows(rows, valid=10, test=10)
    assert [len(parts[k]) for k in ("train", "valid", "test")] == [980, 10, 10]
    held = {r[0] for r in parts["valid"] + parts["test"]}
    assert not held & {r[0] for r in parts["train"]}
    assert max(int(r[0]) for r in parts["test"]) > 900  # not just the first verses


@pytest.mark.skipif(
    not (SWORD_DIR / "modules/texts/ztext/spaRV1909eb").is_dir(),
    reason=f"Bible modules absent: {APT_INSTALL}",
)
def test_real_bible_book_aligns_verse_by_verse(tmp_path):
    rows = extract_bible(books=["Ruth"])
    assert len(rows) == 85  # Ruth: 22 + 23 + 18 + 22 verses
    assert rows[0][0] == "Ruth 1:1" and rows[-1][0] == "Ruth 4:22"
    assert "Moab" in rows[0][1] and "Moab" in rows[0][2]
    assert all("<" not in es + en for _, es, en in rows)
    counts = rows_to_corpus(rows, tmp_path, valid=5, test=5)
    assert counts == {"train": 75, "valid": 5, "test": 5}
    assert len(read_pairs(tmp_path, "es", "en", "test")) == 5


def test_bpe_on_a_generated_corpus_round_trips_with_fixed_special_ids(tmp_path):
    pairs = _generated_corpus(tmp_path)
    model = train_bpe(tmp_path, "es", "en", vocab_size=60, model_dir=tmp_path / "bpe")
    bpe = BPE(model)
    assert bpe.vocab_size == 60
    assert [bpe.sp.pad_id(), bpe.sp.bos_id(), bpe.sp.eos_id(), bpe.sp.unk_id()] == [PAD, BOS, EOS, 3]
    sentences = [p[1] for p in pairs[-20:]]
    ids = bpe.encode(sentences)
    assert all(min(row) > 3 for row in ids)  # no special ids inside a sentence
    # decode stops at EOS and drops BOS/PAD, giving back detokenised text
    padded = [[BOS, *row, EOS, PAD, 9] for row in ids]
    assert bpe.decode(padded) == sentences
    # the shared vocabulary covers both languages
    assert max(len(r) for r in bpe.encode([p[0] for p in pairs[-20:]])) < 40
    assert train_bpe(tmp_path, "es", "en", 60, tmp_path / "bpe") == model  # cached


def test_the_bpe_cache_is_keyed_by_the_corpus_it_was_built_from(tmp_path):
    """An edited corpus gets a model of its own: the cached one was built from other text."""
    _generated_corpus(tmp_path)
    first = train_bpe(tmp_path, "es", "en", vocab_size=60, model_dir=tmp_path / "bpe")
    before = first.stat().st_mtime_ns
    assert train_bpe(tmp_path, "es", "en", 60, tmp_path / "bpe") == first  # same bytes: reused, not retrained
    assert first.stat().st_mtime_ns == before
    en = tmp_path / "train.en"
    en.write_text(en.read_text(encoding="utf-8").replace("the", "zyx"), encoding="utf-8")
    edited = train_bpe(tmp_path, "es", "en", 60, tmp_path / "bpe")
    assert edited != first and edited.is_file()
    assert BPE(edited).encode(["zyx"]) != BPE(first).encode(["zyx"])  # trained on the edited text


def test_misaligned_files_are_refused_before_bpe_trains(tmp_path):
    _generated_corpus(tmp_path)
    es = tmp_path / "train.es"
    es.write_text(es.read_text(encoding="utf-8") + "una frase de más.\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        train_bpe(tmp_path, "es", "en", 60, tmp_path / "bpe")
    assert "train.es has 381 lines but train.en has 380" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "bpe").exists()  # nothing trained, nothing cached


def test_bleu_is_100_for_exact_and_orders_hypotheses_by_overlap():
    refs = ["the dog eats bread in the house .", "the sun and the moon see the sea ."]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    close = ["the dog eats bread in a house .", "the sun and the moon see a sea ."]
    far = ["a dog eats .", "moon sea ."]
    assert 0.0 < corpus_bleu(far, refs) < corpus_bleu(close, refs) < 100.0
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        corpus_bleu(refs[:1], refs)
