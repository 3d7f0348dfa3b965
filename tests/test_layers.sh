#!/usr/bin/env bash
# scripts/check-layers: the tree's includes and calls run downwards, and the
# check finds what goes up: an include of a higher room, a call into one
# (from an object), two files calling each other (parts of one engine
# over a shared *_impl.h too), the registry naming
# a backend's internals, and two backends over one shared engine
# including each other.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
BUILD=${BUILD:-build}

# passes DESC: the check, run on the scratch tree, accepts it.
passes() {
    if out=$(scripts/check-layers --root "$tmp" "$tmp/build" 2>&1); then pass; else fail "$1 was refused: $out"; fi
}
# refuses DESC TEXT: the check refuses the scratch tree, naming TEXT.
refuses() {
    if out=$(scripts/check-layers --root "$tmp" "$tmp/build" 2>&1); then
        fail "$1 passed: $out"
    elif ! grep -qF "$2" <<<"$out"; then
        fail "$1 refused without naming '$2': $out"
    else
        pass
    fi
}
compile() { cc -I"$tmp" -c -o "$2" "$1" || fail "cc $1 failed"; }

if out=$(scripts/check-layers "$BUILD" 2>&1); then pass; else fail "the tree breaks its own layering: $out"; fi

scratch
mkdir -p "$tmp/base" "$tmp/workloads" "$tmp/backends/toy" "$tmp/backends/other" \
         "$tmp/harness" "$tmp/build/workloads" "$tmp/build/harness" "$tmp/build/backends"
echo 'int harness_helper(void);' > "$tmp/harness/helper.h"
echo 'int harness_helper(void) { return 1; }' > "$tmp/harness/helper.c"
echo 'int toy_internal(void); extern int toy_backend;' > "$tmp/backends/toy/toy.h"
printf 'int toy_internal(void) { return 2; }\nint toy_backend = 3;\n' > "$tmp/backends/toy/toy.c"
echo 'int workload_size(void) { return 0; }' > "$tmp/workloads/clean.c"

# a clean tree passes
passes "a clean tree"

# an include that goes up
printf '#include "harness/helper.h"\n' > "$tmp/workloads/up.h"
refuses "an upward include" 'workloads/up.h includes harness/helper.h'
rm "$tmp/workloads/up.h"

# a backend may include another backend's public header, not its others
mv "$tmp/backends/toy/toy.h" "$tmp/backends/toy/internal.h"
printf '#include "backends/toy/internal.h"\n' > "$tmp/backends/other/other.c"
refuses "an include of another backend's internal header" 'backends/other/other.c includes backends/toy/internal.h'
mv "$tmp/backends/toy/internal.h" "$tmp/backends/toy/toy.h"
printf '#include "backends/toy/toy.h"\n' > "$tmp/backends/other/other.c"
passes "an include of another backend's public header"
rm "$tmp/backends/other/other.c"

# two backends built over one shared engine (backends/chwn/) meet only in
# it: each may include any of its headers, neither the other's files, not
# even its public header; the engine includes no backend's
mkdir -p "$tmp/backends/chwn"
echo 'int chwn_entry(void);' > "$tmp/backends/chwn/chwn_products.h"
printf '#include "backends/chwn/chwn_products.h"\n' > "$tmp/backends/toy/toy_products.c"
printf '#include "backends/chwn/chwn_products.h"\n' > "$tmp/backends/other/other_products.c"
passes "two backends over the shared engine including its headers"
printf '#include "backends/toy/toy.h"\n' > "$tmp/backends/other/other.c"
refuses "a backend including its sibling's public header" 'backends/other/other.c includes backends/toy/toy.h (two backends over backends/chwn/'
rm "$tmp/backends/other/other.c"
printf '#include "backends/toy/toy.h"\n' > "$tmp/backends/chwn/engine.c"
refuses "the shared engine including a backend" 'backends/chwn/engine.c includes backends/toy/toy.h'
rm -r "$tmp/backends/chwn" "$tmp/backends/toy/toy_products.c" "$tmp/backends/other/other_products.c"

# a call that goes up, seen in the objects
printf 'int harness_helper(void);\nint workload_calls_up(void) { return harness_helper(); }\n' > "$tmp/workloads/call.c"
compile "$tmp/workloads/call.c" "$tmp/build/workloads/call.o"
compile "$tmp/harness/helper.c" "$tmp/build/harness/helper.o"
refuses "an upward call" 'workloads/call.o calls harness_helper, defined in harness/helper.o'
# the same object left behind by an older tree, its source gone, is not read
mv "$tmp/build/workloads/call.o" "$tmp/build/workloads/gone_f64.o"
passes "an object whose source is gone"
rm "$tmp/build/workloads/gone_f64.o"

# two files of one room that call each other
printf 'int ping(void);\nint pong(void) { return ping(); }\n' > "$tmp/harness/pong.c"
printf 'int pong(void);\nint ping(void) { return pong(); }\n' > "$tmp/harness/ping.c"
compile "$tmp/harness/pong.c" "$tmp/build/harness/pong.o"
compile "$tmp/harness/ping.c" "$tmp/build/harness/ping.o"
refuses "a call cycle" 'harness/ping.o and harness/pong.o call each other'
rm "$tmp/build/harness/pong.o" "$tmp/build/harness/ping.o"
# ... also when both are parts of one engine over a shared *_impl.h
echo 'int ping(void); int pong(void);' > "$tmp/backends/toy/toy_impl.h"
printf '#include "backends/toy/toy_impl.h"\nint pong(void) { return ping(); }\n' > "$tmp/backends/toy/pong.c"
printf '#include "backends/toy/toy_impl.h"\nint ping(void) { return pong(); }\n' > "$tmp/backends/toy/ping.c"
mkdir -p "$tmp/build/backends/toy"
compile "$tmp/backends/toy/pong.c" "$tmp/build/backends/toy/pong.o"
compile "$tmp/backends/toy/ping.c" "$tmp/build/backends/toy/ping.o"
refuses "a call cycle over a shared *_impl.h" 'backends/toy/ping.o and backends/toy/pong.o call each other'
rm "$tmp/build/backends/toy/pong.o" "$tmp/build/backends/toy/ping.o" "$tmp/backends/toy/pong.c" \
   "$tmp/backends/toy/ping.c" "$tmp/backends/toy/toy_impl.h"

# the registry may name a backend's registration, not its internals
mkdir -p "$tmp/build/backends/toy"
compile "$tmp/backends/toy/toy.c" "$tmp/build/backends/toy/toy.o"
printf 'extern int toy_backend;\nint *registry_entry(void) { return &toy_backend; }\n' > "$tmp/backends/registry.c"
compile "$tmp/backends/registry.c" "$tmp/build/backends/registry.o"
passes "the registry naming a registration"
printf 'int toy_internal(void);\nint registry_entry(void) { return toy_internal(); }\n' > "$tmp/backends/registry.c"
compile "$tmp/backends/registry.c" "$tmp/build/backends/registry.o"
refuses "the registry calling a backend's internal" 'registry.o calls toy_internal, an internal of backends/toy/'

finish
