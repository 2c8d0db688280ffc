#!/usr/bin/env bash
# gpu2 helper, session s4, call 3 of the DALI machine (issue #17): keep DALI part 3 (a transfer only).
. "$(dirname "$0")/h200_s4.lib.sh"
take_part 3
finish
