#!/bin/sh
# doc_lines.sh - runs the runnable command lines of a Markdown file as they are written, so the
# documentation cannot drift from what works (driven by doc_lines.cmake).
#   doc_lines.sh SRC FILE BUILD
# The runnable lines are those of the fenced blocks opened with ```sh run (GitHub shows them as
# sh): every line of such a block that is not empty and not a comment is one command, and a
# line ending in \ goes on on the next one. Each runs verbatim with `sh -c` from SRC (the
# repository root) under a `timeout` of DOC_LINE_TIMEOUT_S seconds (default 120), with stdin
# from /dev/null. Commands that name the build folder name build/, so BUILD must be SRC/build
# (another build folder exits 77, skipped, saying why).
#
# python3 and python on PATH are a stub that fails, as pyenv's or a venv's python3 without
# numpy and cffi would: a documented line must run the build's interpreter (build/bin/
# plexus-python), not whatever python3 comes first. DOC_LINES_SKIP, an extended regular
# expression, leaves out the lines it matches (the build lacks what they need:
# DOC_LINES_SKIP_WHY says what), each listed as skipped.
#
# Fails naming FILE:LINE, the command and its output for every line that exits non-zero, when
# the file has no runnable line at all, or when the commands changed `git status --porcelain`
# of SRC (a documented line must write under build/ or /tmp, not into the checkout).
set -u
src=$1 file=$2 build=$3
per_line=${DOC_LINE_TIMEOUT_S:-120}
skip=${DOC_LINES_SKIP:-}
skip_why=${DOC_LINES_SKIP_WHY:-the build lacks what they need}

fail() { echo "FAIL: $*"; exit 1; }

cd "$src" || fail "cannot enter $src"
[ -f "$file" ] || fail "no file $src/$file"
real_build=$(cd "$build" && pwd -P) || fail "no build folder $build"
doc_build=$(cd build 2>/dev/null && pwd -P)
if [ "$real_build" != "$doc_build" ]; then
    echo "skipped: the documented commands name build/ ($src/build), and this build is" \
         "$real_build; run this test in the build folder \`make\` uses"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/px-doc-lines.XXXXXX") || fail "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The python3 that a documented line must not rely on.
mkdir "$tmp/bin" || fail "cannot make $tmp/bin"
cat > "$tmp/bin/python3" <<'EOF'
#!/bin/sh
echo "${0##*/}: not the build's python (a stub of tests/system/doc_lines.sh: python3 on PATH" \
     "may be pyenv's or a venv's, without numpy and cffi; use build/bin/plexus-python)" >&2
exit 1
EOF
chmod 755 "$tmp/bin/python3" && cp "$tmp/bin/python3" "$tmp/bin/python" ||
    fail "cannot write the python3 stub"
PATH=$tmp/bin:$PATH
export PATH

# One record per command: its first line's number, a tab, the command (continuations joined,
# as sh joins them: the backslash and the newline removed).
awk '
    /^```/ {
        if (inblk && cont != "") { print cont "\t" cmd; cont = "" }
        if (inblk) { inblk = 0; next }
        if ($0 ~ /^```sh run[ \t]*$/) inblk = 1
        next
    }
    !inblk { next }
    cont != "" { cmd = cmd $0 }
    cont == "" {
        if ($0 ~ /^[ \t]*$/ || $0 ~ /^[ \t]*#/) next
        cmd = $0; cont = NR
    }
    /\\$/ { sub(/\\$/, "", cmd); next }
    { print cont "\t" cmd; cont = "" }
    END { if (inblk && cont != "") print cont "\t" cmd }
' "$file" > "$tmp/lines" || fail "cannot read $file"

found=$(wc -l < "$tmp/lines")
[ "$found" -gt 0 ] || fail "$file has no runnable line (no \`\`\`sh run block): nothing checked"

git_status() { git -C "$src" status --porcelain --untracked-files=all 2>/dev/null; }
git_status > "$tmp/status.before"

ran=0 failed=0 skipped=0
tab=$(printf '\t')
while IFS=$tab read -r no cmd; do
    if [ -n "$skip" ] && printf '%s\n' "$cmd" | grep -Eq -- "$skip"; then
        echo "== $file:$no: skipped ($skip_why): $cmd"
        skipped=$((skipped + 1))
        continue
    fi
    echo "== $file:$no: $cmd"
    t0=$(date +%s)
    timeout -k 10 "$per_line" sh -c "$cmd" < /dev/null > "$tmp/out" 2>&1
    rc=$?
    ran=$((ran + 1))
    sed 's/^/   /' "$tmp/out"
    if [ "$rc" -ne 0 ]; then
        why="exit status $rc"
        [ "$rc" -eq 124 ] && why="timed out after $per_line s"
        echo "FAIL: $file:$no: $why: $cmd"
        failed=$((failed + 1))
    else
        echo "   (ok, $(($(date +%s) - t0)) s)"
    fi
done < "$tmp/lines"

echo "$file: $found runnable lines, $ran run, $skipped skipped, $failed failed"
problems=
[ "$failed" -eq 0 ] || problems="$failed of the runnable lines of $file failed (above)"
git_status > "$tmp/status.after"
if ! cmp -s "$tmp/status.before" "$tmp/status.after"; then
    echo "git status --porcelain of $src, before and after:"
    diff "$tmp/status.before" "$tmp/status.after" | sed -n 's/^\([<>]\) /   \1 /p'
    problems="${problems:+$problems; }the lines of $file changed git status --porcelain of"
    problems="$problems $src (above): a documented line must write under build/ or /tmp"
fi
[ -z "$problems" ] || fail "$problems"
[ "$ran" -gt 0 ] || { echo "skipped: every runnable line of $file was left out ($skip_why)"; exit 77; }
echo PASS
