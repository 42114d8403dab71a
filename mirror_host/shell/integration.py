"""Shell integration: the snippets that make bash, zsh and fish mark their prompts. Pure.

``mirror-host shell-init SHELL`` prints one of these (``eval "$(mirror-host
shell-init bash)"`` at the end of ``~/.bashrc``); the local source loads the
same code into the shells it starts, after the user's own start-up files
(:mod:`mirror_host.shell.inject`). Each snippet:

* marks where the prompt starts and, with ``OSC 133 ; B``, where it ends, from
  inside the prompt itself, so a shell that redraws its prompt (Ctrl-L, a
  resize) marks it again; ``C`` when a command line is accepted; ``D;status``
  when the command is done. The prompt's start is kitty's explicit
  ``133;P;k=i`` rather than ``A``: libghostty (like Ghostty) moves an ``A``
  that finds the cursor mid-line to a fresh line, and tmux does not, so the
  host's copy of a tmux pane would drift a row from tmux's own after every
  command whose output does not end its last line;
* keeps the user's own prompt, ``PROMPT_COMMAND``, ``PS0``, ``precmd`` and
  ``preexec`` hooks and ``fish_prompt``: it wraps them, runs its prompt part
  after theirs (so a theme that rewrites the prompt every time keeps its
  marks), and hands their exit status on unchanged;
* loads once, however often it is sourced, and only in interactive shells;
* signs every mark with the nonce the host started the shell with
  (``MIRROR_HOST_MARK_NONCE``, :mod:`mirror_host.shell.nonce`): ``133;B;mh=NONCE``.
  It keeps the nonce in a variable of its own that is not exported and drops
  the environment variable, so the shell's programs do not inherit it; bash's
  prompt strings name that variable rather than hold its value (``PS1`` is
  often exported, and a shell ``exec``'d in its place would otherwise draw
  signed marks without ever marking a command's start). zsh's prompt cannot
  name a variable unless the user has ``PROMPT_SUBST``, so zsh's ``PS1`` holds
  the marks only while the prompt waits: they are added before it is drawn,
  taken out again before a command line runs, and ``PS1`` is not exported
  while it holds them. Without a nonce the marks go unsigned;
* in bash before 4.4 (no ``PS0``, so no ``C`` when a command starts) marks no
  ``B``: the host could not tell a command running from the prompt waiting.

Another integration that also emits OSC 133 marks (Ghostty's, kitty's …) may
run beside it: the marks then come twice at the same places, which the host's
reading (:mod:`mirror_host.shell.marks`) takes as they come: only the latest
mark counts.
"""

from __future__ import annotations

__all__ = ["SHELL_NAMES", "snippet"]

SHELL_NAMES = ("bash", "zsh", "fish")

_BASH = r"""# mirror-host shell integration for bash: OSC 133 prompt marks (docs/operations.md).
if [[ $- == *i* && -z ${__mirror_host_marks-} ]]; then
    __mirror_host_marks=1
    # The host's nonce for these marks (docs/security.md): kept, not exported.
    __mirror_host_mh=${MIRROR_HOST_MARK_NONCE-}
    builtin unset MIRROR_HOST_MARK_NONCE
    if [[ ${#__mirror_host_mh} -ge 16 && ${#__mirror_host_mh} -le 128 &&
          $__mirror_host_mh != *[!0123456789abcdef]* ]]; then
        __mirror_host_mh=";mh=$__mirror_host_mh"
    else
        __mirror_host_mh=
    fi
    builtin export -n __mirror_host_mh
    # The prompt strings name the nonce, expanded as the prompt is drawn.
    __mirror_host_a=$'\\[\e]133;P;k=i${__mirror_host_mh}\a\\]'
    __mirror_host_b=$'\\[\e]133;B${__mirror_host_mh}\a\\]'
    __mirror_host_c=$'\e]133;C${__mirror_host_mh}\a'
    if (( BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4) )); then
        __mirror_host_b=  # no PS0, so no C: never claim the prompt waits
    fi
    __mirror_host_prompt_start() {
        local status=$?
        builtin printf '\e]133;D;%s%s\a' "$status" "$__mirror_host_mh"
        return "$status"
    }
    __mirror_host_prompt_end() {
        local status=$?
        PS1=${PS1//"$__mirror_host_a"/}
        [[ -z $__mirror_host_b ]] || PS1=${PS1//"$__mirror_host_b"/}
        PS1=$__mirror_host_a$PS1$__mirror_host_b
        [[ ${PS0-} == *"$__mirror_host_c"* ]] || PS0=${PS0-}$__mirror_host_c
        return "$status"
    }
    if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then
        PROMPT_COMMAND=(__mirror_host_prompt_start
            ${PROMPT_COMMAND[@]+"${PROMPT_COMMAND[@]}"} __mirror_host_prompt_end)
    else
        PROMPT_COMMAND=__mirror_host_prompt_start${PROMPT_COMMAND:+$'\n'$PROMPT_COMMAND}
        PROMPT_COMMAND+=$'\n'__mirror_host_prompt_end
    fi
fi
"""

_ZSH = r"""# mirror-host shell integration for zsh: OSC 133 prompt marks (docs/operations.md).
if [[ -o interactive && -z ${__mirror_host_marks-} ]]; then
    typeset -g __mirror_host_marks=1
    # The host's nonce for these marks (docs/security.md): kept, not exported.
    typeset -g __mirror_host_mh=${MIRROR_HOST_MARK_NONCE-}
    builtin unset MIRROR_HOST_MARK_NONCE
    if [[ ${#__mirror_host_mh} -ge 16 && ${#__mirror_host_mh} -le 128 &&
          $__mirror_host_mh != *[^0123456789abcdef]* ]]; then
        __mirror_host_mh=";mh=$__mirror_host_mh"
    else
        __mirror_host_mh=
    fi
    typeset -g __mirror_host_a=$'%{\e]133;P;k=i'$__mirror_host_mh$'\a%}'
    typeset -g __mirror_host_b=$'%{\e]133;B'$__mirror_host_mh$'\a%}'
    typeset -g __mirror_host_export=
    typeset -g +x __mirror_host_mh __mirror_host_a __mirror_host_b
    # The marks in PS1 hold the nonce (zsh's prompt cannot name a variable without
    # PROMPT_SUBST), so PS1 carries them only while the prompt waits, and is not
    # exported meanwhile: a command line starts with them gone and PS1 as it was.
    __mirror_host_unmark() {
        PS1=${PS1//$__mirror_host_a/}
        PS1=${PS1//$__mirror_host_b/}
        if [[ -n $__mirror_host_export ]]; then
            __mirror_host_export=
            builtin export PS1
        fi
    }
    __mirror_host_precmd() {
        local ret=$?
        builtin print -rn -- $'\e]133;D;'"$ret$__mirror_host_mh"$'\a'
        __mirror_host_unmark
        if [[ ${(t)PS1} == *-export* ]]; then
            __mirror_host_export=1
            builtin typeset -g +x PS1
        fi
        PS1=$__mirror_host_a$PS1$__mirror_host_b
        # Run after every other precmd hook from the next prompt on, so a theme
        # that sets the prompt in its own hook keeps the marks.
        if [[ ${precmd_functions[-1]} != __mirror_host_precmd ]]; then
            precmd_functions=(${precmd_functions:#__mirror_host_precmd} __mirror_host_precmd)
        fi
        return $ret
    }
    __mirror_host_preexec() {
        builtin print -rn -- $'\e]133;C'"$__mirror_host_mh"$'\a'
        __mirror_host_unmark
    }
    typeset -ga precmd_functions preexec_functions
    precmd_functions+=(__mirror_host_precmd)
    preexec_functions+=(__mirror_host_preexec)
fi
"""

_FISH = r"""# mirror-host shell integration for fish: OSC 133 prompt marks (docs/operations.md).
if status is-interactive; and not set -q __mirror_host_marks
    set -g __mirror_host_marks 1
    # The host's nonce for these marks (docs/security.md): kept, not exported.
    set -gu __mirror_host_mh ''
    if set -q MIRROR_HOST_MARK_NONCE
        and string match -qr '^[0-9a-f]{16,128}$' -- "$MIRROR_HOST_MARK_NONCE"
        set -gu __mirror_host_mh ";mh=$MIRROR_HOST_MARK_NONCE"
    end
    set -eg MIRROR_HOST_MARK_NONCE
    function __mirror_host_return
        return $argv[1]
    end
    function __mirror_host_wrap_prompt --on-event fish_prompt
        # Wrap fish_prompt again whenever it is (re)defined by someone else.
        if functions -q fish_prompt
            and not functions fish_prompt | string match -q '*__mirror_host_user_prompt*'
            functions -e __mirror_host_user_prompt
            functions -c fish_prompt __mirror_host_user_prompt
            function fish_prompt
                set -l last_status $status
                printf '\e]133;P;k=i%s\a' "$__mirror_host_mh"
                __mirror_host_return $last_status
                __mirror_host_user_prompt
                printf '\e]133;B%s\a' "$__mirror_host_mh"
            end
        end
    end
    function __mirror_host_preexec --on-event fish_preexec
        printf '\e]133;C%s\a' "$__mirror_host_mh"
    end
    function __mirror_host_postexec --on-event fish_postexec
        printf '\e]133;D;%s%s\a' $status "$__mirror_host_mh"
    end
end
"""

_SNIPPETS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


def snippet(shell: str) -> str:
    """The integration for ``shell`` (``bash``, ``zsh`` or ``fish``).

    Raises:
        KeyError: another shell.
    """
    return _SNIPPETS[shell]
