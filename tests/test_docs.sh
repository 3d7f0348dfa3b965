#!/usr/bin/env bash
# scripts/check-docs: README.md and docs/ pass, and the check fails on each
# kind of rot it is there for: a link to a file or heading that is not
# there, an image that is not there, a flag ./bench (or a subcommand) does
# not take, a test that does not exist.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
command -v python3 >/dev/null || { echo "test_docs.sh: no python3: skipped"; exit 77; }

if out=$(scripts/check-docs --bench "$BENCH" 2>&1); then pass; else fail "the documents do not pass: $out"; fi

scratch
# refuses DESC TEXT: a page holding DESC's line is refused, naming TEXT.
refuses() {
    printf '# A page\n\n## Heading here\n\n%s\n' "$1" > "$tmp/page.md"
    if out=$(scripts/check-docs --bench "$BENCH" "$tmp/page.md" 2>&1); then
        fail "'$1' passed: $out"
    elif ! grep -qF -- "$2" <<<"$out"; then
        fail "'$1' refused without naming '$2': $out"
    else
        pass
    fi
}
passes() {
    printf '# A page\n\n## Heading here\n\n%s\n' "$1" > "$tmp/page.md"
    if out=$(scripts/check-docs --bench "$BENCH" "$tmp/page.md" 2>&1); then pass; else fail "'$1' was refused: $out"; fi
}

mkdir -p "$tmp/img"
touch "$tmp/img/chart.png"
passes 'See [the chart](img/chart.png), ![chart](img/chart.png) and [below](#heading-here).'
passes 'Run `./bench --backend naive --epochs 1` or `./bench compare --relative-to naive A B`.'
refuses 'See [the manual](no-such-page.md).' 'link to no-such-page.md: no such file'
refuses '![a chart](img/missing.png)' 'link to img/missing.png: no such file'
refuses 'See [there](#no-such-heading).' 'no such heading'
refuses 'Run `./bench --backend naive --no-such-flag`.' '--no-such-flag is not an option of ./bench'
printf '# A page\n\n```\nmpirun -np 2 ./bench --epochs 1 --removed-flag 3\n```\n' > "$tmp/page.md"
if out=$(scripts/check-docs --bench "$BENCH" "$tmp/page.md" 2>&1); then
    fail "a removed flag in a code block passed: $out"
elif grep -qF -- '--removed-flag is not an option' <<<"$out"; then pass
else fail "a removed flag in a code block not named: $out"; fi
refuses 'Run `./bench compare --no-such-compare-flag A B`.' 'not an option of ./bench compare'
refuses 'Checked by `test_never_written.sh`.' 'names test_never_written.sh, which is not a test'

# Bad usage (a page that is not there, a directory, an unknown option) and a
# ./bench that cannot be run: exit 2 with one line, no traceback, no list
# of bogus problems.
bad_usage() {
    local out rc
    out=$(scripts/check-docs "$@" 2>&1); rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && ! grep -q Traceback <<<"$out"; then
        pass
    else
        fail "check-docs $*: exit $rc, expected 2 with one line: $out"
    fi
}
bad_usage --bench "$BENCH" /nonexistent.md
bad_usage --bench "$BENCH" docs
bad_usage --bench "$BENCH" --no-such-option
bad_usage --bench /bin/false
bad_usage --bench /bin/true

finish
