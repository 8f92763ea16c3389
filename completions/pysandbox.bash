# bash completion for pysandbox. Options are read from `pysandbox <command> --help` when
# completing, so they cannot drift from the binary's own CLI definition.
_pysandbox() {
    local cur prev words cword
    _init_completion || return
    local cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in run|profile|doctor) cmd=${words[i]}; break ;; esac
    done
    case $prev in
        -p|--profile)
            COMPREPLY=($(compgen -W "$("${words[0]}" profile list 2>/dev/null | cut -f1)" -- "$cur"))
            compopt -o filenames; COMPREPLY+=($(compgen -f -- "$cur")); return ;;
        --net) COMPREPLY=($(compgen -W "none loopback" -- "$cur")); return ;;
        --timeout|--cpu-time|--memory|--max-procs|--tmp-size|--output-limit|--env|-c) return ;;
    esac
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "run profile doctor --help --version" -- "$cur")); return
    fi
    if [[ $cmd == profile ]]; then
        if [[ $prev == show ]]; then
            COMPREPLY=($(compgen -W "$("${words[0]}" profile list 2>/dev/null | cut -f1)" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "list show" -- "$cur"))
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$("${words[0]}" "$cmd" --help 2>/dev/null |
            grep -oE -- '(^|[ ,])--?[A-Za-z][-A-Za-z]*' | tr -d ' ,' | sort -u)" -- "$cur"))
        return
    fi
    _filedir py
}
complete -F _pysandbox pysandbox
