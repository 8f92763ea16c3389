#!/usr/bin/zsh -f
# Prints what zsh's completion system offers for each command line given, as a `### LINE` header
# followed by the matches, one a line:
#
#     zsh -f zsh_complete.zsh COMPLETION_DIR 'pysandbox run --pro' 'pysandbox run -p '
#
# One real interactive zsh runs in a pseudo-terminal (zpty), so compinit runs once; each line is
# typed into it followed by a TAB, then erased. Inside, compadd is wrapped to append every match it
# would add to a file, and a hook run after completion marks that file finished. No screen output
# is parsed.
emulate -L zsh
zmodload zsh/zpty zsh/zselect

completion_dir=$1
shift
work=$(mktemp -d)
trap 'zpty -d shell 2>/dev/null; rm -rf $work' EXIT

zpty shell zsh -f -i
zpty -w shell "fpath=(${(q)completion_dir} \$fpath); autoload -Uz compinit; compinit -u -D
compadd() {
    if (( \${@[(I)-[OAD]*]} )); then builtin compadd \"\$@\"; return; fi
    local -a matches; builtin compadd -O matches \"\$@\"
    (( \$#matches )) && print -rl -- \$matches >> ${(q)work}/matches
    builtin compadd \"\$@\"
}
_capture_complete() { comppostfuncs=(_capture_done); _main_complete \"\$@\" }
_capture_done() { print -n > ${(q)work}/done }
zle -C capture-complete complete-word _capture_complete
bindkey -e; bindkey '^I' capture-complete"

complete_line() {
    rm -f $work/matches $work/done
    zpty -w -n shell "$1"$'\t'
    local i
    for i in {1..200}; do
        [[ -e $work/done ]] && break
        zselect -t 5  # 50 ms
    done
    [[ -e $work/done ]] || { print -u2 "zsh_complete: no completion finished for: $1"; exit 1 }
    print -r -- "### $1"
    [[ -e $work/matches ]] && sort -u $work/matches
    zpty -w -n shell $'\C-a\C-k'  # erase the line for the next one
}

for line in "$@"; do complete_line $line; done
exit 0
