"""Shell integration: the snippets that mark prompts and take phones' commands. Pure.

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
* takes a phone's command line into the line editor itself
  (:mod:`mirror_host.shell.exchange`): it binds :data:`~mirror_host.shell.exchange.TRIGGER`
  in every keymap (bash: emacs, vi-insert, vi-command; zsh: emacs, viins,
  vicmd; fish: default, insert, visual) to a function that reads
  ``<dir>/<pid>.request`` and answers with one exclusive creation of
  ``<dir>/<pid>.<id>.answer``: it refuses when its command line holds text
  or it is not at its main prompt (a continuation line, ``read -e``,
  ``vared``, fish's ``read``), else it sets its buffer to exactly the text (no
  keys typed, so no paste widget, autosuggestion, vi command or abbreviation
  acts on it) and accepts the line. bash's ``bind -x`` cannot accept a line,
  so there the trigger is a macro of two private sequences: the first runs
  the function, which binds the second to ``accept-line`` when it loaded the
  line (else to ``redraw-current-line``). zsh calls ``.accept-line`` (no
  wrapper of the user's runs); fish masks abbreviations for that one line
  with one that expands every word to itself, and removes it again;
* touches ``<dir>/<pid>.prompt`` at every prompt (and when it loads), with
  builtins only and errors silenced, so the host knows this shell has the
  integration even where it does not read the pane's output;
* keeps the user's own prompt, ``PROMPT_COMMAND``, ``PS0``, ``precmd`` and
  ``preexec`` hooks and ``fish_prompt``: it wraps them, runs its prompt part
  after theirs (so a theme that rewrites the prompt every time keeps its
  marks), and hands their exit status on unchanged;
* loads once, however often it is sourced, and only in interactive shells;
* signs every mark with the nonce the host started the shell with
  (``MIRROR_HOST_MARK_NONCE``, :mod:`mirror_host.shell.nonce`): ``133;B;mh=NONCE``,
  and learns the directory from ``MIRROR_HOST_SHELL_DIR``
  (:mod:`mirror_host.shell.directory`). It keeps both in variables of its own
  that are not exported and drops the environment variables, so the shell's
  programs do not inherit them; bash's prompt strings name the nonce's
  variable rather than hold its value (``PS1`` is often exported, and a shell
  ``exec``'d in its place would otherwise draw signed marks without ever
  marking a command's start). zsh's prompt cannot name a variable unless the
  user has ``PROMPT_SUBST``, so zsh's ``PS1`` holds the marks only while the
  prompt waits: they are added before it is drawn, taken out again before a
  command line runs, and ``PS1`` is not exported while it holds them. Without
  a nonce the marks go unsigned;
* in bash before 4.4 (no ``PS0``, so no ``C`` when a command starts) marks no
  ``B`` and takes no command: the host could not tell a command running from
  the prompt waiting, nor the shell a command line from ``read -e``.

Another integration that also emits OSC 133 marks (Ghostty's, kitty's …) may
run beside it: the marks then come twice at the same places, which the host's
reading (:mod:`mirror_host.shell.marks`) takes as they come: only the latest
mark counts.
"""

from __future__ import annotations

__all__ = ["SHELL_NAMES", "setup_hint", "snippet"]

SHELL_NAMES = ("bash", "zsh", "fish")

_BASH = r"""# mirror-host shell integration for bash: prompt marks, phones' commands.
# docs/operations.md, "Shell commands from phones".
if [[ $- == *i* && -z ${__mirror_host_marks-} ]]; then
    __mirror_host_marks=1
    # The host's nonce for these marks and its directory for phones' commands
    # (docs/security.md): kept, not exported.
    __mirror_host_mh=${MIRROR_HOST_MARK_NONCE-}
    __mirror_host_dir=${MIRROR_HOST_SHELL_DIR-}
    builtin unset MIRROR_HOST_MARK_NONCE MIRROR_HOST_SHELL_DIR
    if [[ ${#__mirror_host_mh} -ge 16 && ${#__mirror_host_mh} -le 128 &&
          $__mirror_host_mh != *[!0123456789abcdef]* ]]; then
        __mirror_host_mh=";mh=$__mirror_host_mh"
    else
        __mirror_host_mh=
    fi
    [[ $__mirror_host_dir == /* ]] || __mirror_host_dir=
    # 1 while the primary prompt waits: set as PS1 is drawn, cleared by PS0 (a
    # command line was accepted) and PS2 (a continuation line).
    __mirror_host_ready=0
    __mirror_host_nil=
    builtin export -n __mirror_host_mh __mirror_host_dir __mirror_host_ready __mirror_host_nil
    # The prompt strings name the nonce, expanded as the prompt is drawn.
    __mirror_host_a=$'\\[\e]133;P;k=i${__mirror_host_mh}\a\\]'
    __mirror_host_b=$'\\[\e]133;B${__mirror_host_mh}\a\\]${__mirror_host_nil:$((__mirror_host_ready=1)):0}'
    __mirror_host_c=$'\e]133;C${__mirror_host_mh}\a${__mirror_host_nil:$((__mirror_host_ready=0)):0}'
    __mirror_host_2='${__mirror_host_nil:$((__mirror_host_ready=0)):0}'
    if (( BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4) )); then
        __mirror_host_b=  # no PS0, so no C: never claim the prompt waits
        __mirror_host_dir=
    fi
    __mirror_host_register() {
        [[ -n $__mirror_host_dir ]] && { : >| "$__mirror_host_dir/$$.prompt"; } 2>/dev/null
    }
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
        [[ ${PS2-} == *"$__mirror_host_2"* ]] || PS2=$__mirror_host_2${PS2-}
        __mirror_host_register
        return "$status"
    }
    # A phone's command line (mirror_host/shell/exchange.py): CSI I runs
    # __mirror_host_take, then whatever it bound the second private sequence to.
    __mirror_host_then() {
        builtin bind -m emacs "\"\\e[>mhB\": $1"
        builtin bind -m vi-insert "\"\\e[>mhB\": $1"
        builtin bind -m vi-command "\"\\e[>mhB\": $1"
    }
    __mirror_host_take() {
        local request id expires now text answer created clobber=1
        local file=$__mirror_host_dir/$$.request
        __mirror_host_then redraw-current-line
        [[ -n $__mirror_host_dir && -f $file && -r $file ]] || return 0
        IFS= builtin read -r -d '' request < "$file"
        id=${request%%$'\n'*}
        text=${request#*$'\n'}
        expires=${text%%$'\n'*}
        text=${text#*$'\n'}
        [[ ${#id} -eq 32 && $id != *[!0123456789abcdef]* && $text == *$'\n' ]] || return 0
        # Past its expiry a request is a dead host's: never run it (a focus report).
        [[ ${#expires} -ge 1 && ${#expires} -le 12 && $expires != *[!0123456789]* ]] || return 0
        builtin printf -v now '%(%s)T' -1
        (( 10#$now <= 10#$expires )) || return 0
        text=${text%$'\n'}
        if [[ $__mirror_host_ready != 1 ]]; then
            answer=$'refused prompt\n'
        elif [[ -n $READLINE_LINE ]]; then
            answer=$'refused line\n'
        else
            answer=$'loaded\n'$text$'\n'
        fi
        [[ $- == *C* ]] && clobber=
        builtin set -C  # the answer file is created exclusively: the host may have cancelled
        { builtin printf '%s' "$answer" > "$__mirror_host_dir/$$.$id.answer"; } 2>/dev/null
        created=$?
        [[ -z $clobber ]] || builtin set +C
        [[ $created == 0 && $answer == loaded* ]] || return 0
        READLINE_LINE=$text
        READLINE_POINT=${#READLINE_LINE}
        __mirror_host_then accept-line
    }
    if [[ -n $__mirror_host_dir ]]; then
        for __mirror_host_map in emacs vi-insert vi-command; do
            builtin bind -m "$__mirror_host_map" -x '"\e[>mhA": __mirror_host_take'
            builtin bind -m "$__mirror_host_map" '"\e[>mhB": redraw-current-line'
            builtin bind -m "$__mirror_host_map" '"\e[I": "\e[>mhA\e[>mhB"'
        done
        builtin unset __mirror_host_map
        __mirror_host_register
    fi
    if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then
        PROMPT_COMMAND=(__mirror_host_prompt_start
            ${PROMPT_COMMAND[@]+"${PROMPT_COMMAND[@]}"} __mirror_host_prompt_end)
    else
        PROMPT_COMMAND=__mirror_host_prompt_start${PROMPT_COMMAND:+$'\n'$PROMPT_COMMAND}
        PROMPT_COMMAND+=$'\n'__mirror_host_prompt_end
    fi
fi
"""

_ZSH = r"""# mirror-host shell integration for zsh: prompt marks, phones' commands.
# docs/operations.md, "Shell commands from phones".
if [[ -o interactive && -z ${__mirror_host_marks-} ]]; then
    typeset -g __mirror_host_marks=1
    # The host's nonce for these marks and its directory for phones' commands
    # (docs/security.md): kept, not exported.
    typeset -g __mirror_host_mh=${MIRROR_HOST_MARK_NONCE-}
    typeset -g __mirror_host_dir=${MIRROR_HOST_SHELL_DIR-}
    builtin unset MIRROR_HOST_MARK_NONCE MIRROR_HOST_SHELL_DIR
    if [[ ${#__mirror_host_mh} -ge 16 && ${#__mirror_host_mh} -le 128 &&
          $__mirror_host_mh != *[^0123456789abcdef]* ]]; then
        __mirror_host_mh=";mh=$__mirror_host_mh"
    else
        __mirror_host_mh=
    fi
    [[ $__mirror_host_dir == /* ]] || __mirror_host_dir=
    typeset -g __mirror_host_a=$'%{\e]133;P;k=i'$__mirror_host_mh$'\a%}'
    typeset -g __mirror_host_b=$'%{\e]133;B'$__mirror_host_mh$'\a%}'
    typeset -g __mirror_host_export=
    typeset -g +x __mirror_host_mh __mirror_host_dir __mirror_host_a __mirror_host_b
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
    # A phone's command line (mirror_host/shell/exchange.py): CSI I runs this widget.
    __mirror_host_take() {
        builtin emulate -L zsh
        builtin setopt noclobber  # the answer file is created exclusively
        local request id expires text answer file=$__mirror_host_dir/$$.request
        [[ -n $__mirror_host_dir && -f $file && -r $file ]] || return 0
        IFS= builtin read -r -d '' request < $file
        id=${request%%$'\n'*}
        text=${request#*$'\n'}
        expires=${text%%$'\n'*}
        text=${text#*$'\n'}
        [[ ${#id} -eq 32 && $id != *[^0123456789abcdef]* && $text == *$'\n' ]] || return 0
        # Past its expiry a request is a dead host's: never run it (a focus report).
        [[ ${#expires} -ge 1 && ${#expires} -le 12 && $expires != *[^0123456789]* ]] || return 0
        builtin zmodload -F zsh/datetime p:EPOCHSECONDS 2>/dev/null || return 0
        (( EPOCHSECONDS <= 10#$expires )) || return 0
        text=${text%$'\n'}
        if [[ $CONTEXT != start || -n $PREBUFFER ]]; then
            answer=$'refused prompt\n'
        elif [[ -n $BUFFER ]]; then
            answer=$'refused line\n'
        else
            answer=$'loaded\n'$text$'\n'
        fi
        { builtin print -rn -- $answer > $__mirror_host_dir/$$.$id.answer } 2>/dev/null || return 0
        [[ $answer == loaded* ]] || return 0
        BUFFER=$text
        CURSOR=$#BUFFER
        zle .accept-line
    }
    zle -N __mirror_host_take
    __mirror_host_bind() {
        builtin bindkey -M emacs '\e[I' __mirror_host_take
        builtin bindkey -M viins '\e[I' __mirror_host_take
        builtin bindkey -M vicmd '\e[I' __mirror_host_take
    }
    __mirror_host_register() {
        [[ -n $__mirror_host_dir ]] && { : >| $__mirror_host_dir/$$.prompt } 2>/dev/null
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
        if [[ -n $__mirror_host_dir ]]; then
            __mirror_host_bind  # again: a plugin may have rebuilt the keymaps
            __mirror_host_register
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
    if [[ -n $__mirror_host_dir ]]; then
        __mirror_host_bind
        __mirror_host_register
    fi
fi
"""

_FISH = r"""# mirror-host shell integration for fish: prompt marks, phones' commands.
# docs/operations.md, "Shell commands from phones".
if status is-interactive; and not set -q __mirror_host_marks
    set -g __mirror_host_marks 1
    # The host's nonce for these marks and its directory for phones' commands
    # (docs/security.md): kept, not exported.
    set -gu __mirror_host_mh ''
    if set -q MIRROR_HOST_MARK_NONCE
        and string match -qr '^[0-9a-f]{16,128}$' -- "$MIRROR_HOST_MARK_NONCE"
        set -gu __mirror_host_mh ";mh=$MIRROR_HOST_MARK_NONCE"
    end
    set -gu __mirror_host_dir ''
    if set -q MIRROR_HOST_SHELL_DIR; and string match -q '/*' -- "$MIRROR_HOST_SHELL_DIR"
        set -gu __mirror_host_dir "$MIRROR_HOST_SHELL_DIR"
    end
    set -eg MIRROR_HOST_MARK_NONCE
    set -eg MIRROR_HOST_SHELL_DIR
    # 1 while the prompt waits: set before it is drawn, cleared when a command runs.
    set -g __mirror_host_ready 0
    function __mirror_host_return
        return $argv[1]
    end
    function __mirror_host_register
        # Builtins only; checked first, as fish warns about a redirection that fails.
        set -l dir $__mirror_host_dir
        test -n "$dir"; and test -d "$dir"; and test -w "$dir"; and true >$dir/$fish_pid.prompt
    end
    function __mirror_host_identity
        # An abbreviation that gives every word back unchanged, for one command line.
        abbr --erase __mirror_host_identity
        printf '%s\n' $argv[1]
    end
    # A phone's command line (mirror_host/shell/exchange.py): CSI I runs this.
    function __mirror_host_take
        set -l file $__mirror_host_dir/$fish_pid.request
        set -l request
        if test -n "$__mirror_host_dir"; and test -f $file; and test -r $file
            read -z request <$file
        end
        # The id, the expiry, the text and the empty rest after the text's line feed.
        set -l parts (string split \n -- "$request")
        set -l now 0
        if test (count $parts) -eq 4; and string match -qr '^[0-9]{1,12}$' -- "$parts[2]"
            set now (date +%s 2>/dev/null); or set now 0
        end
        # Past its expiry a request is a dead host's: never run it (a focus report).
        if test (count $parts) -ne 4; or test -n "$parts[4]"
            or not string match -qr '^[0-9a-f]{32}$' -- "$parts[1]"
            or not string match -qr '^[0-9]{1,12}$' -- "$now"
            or test "$now" -eq 0; or test "$now" -gt "$parts[2]"
            emit fish_focus_in  # CSI I is also a terminal's focus report: fish's own binding
            return 0
        end
        set -l id $parts[1]
        set -l text $parts[3]
        set -l answer "loaded"\n"$text"\n
        set -l line (commandline)
        if test "$__mirror_host_ready" != 1
            set answer 'refused prompt'\n
        else if test -n "$line"
            set answer 'refused line'\n
        end
        if string match -q 'loaded*' -- "$answer"
            # Abbreviations are expanded as a line is executed; this one, added last,
            # comes first and gives the word back unchanged, so the line runs as sent.
            # fish before 3.6 has no such abbreviations: there, only a fish without
            # any may take the line.
            if not abbr --add --position anywhere --regex '.*' \
                    --function __mirror_host_identity -- __mirror_host_identity 2>/dev/null
                set -l known (abbr --list)
                test (count $known) -gt 0; and set answer 'refused abbr'\n
            end
        end
        set -l reply $__mirror_host_dir/$fish_pid.$id.answer
        if test -e $reply; or not printf '%s' "$answer" >?$reply
            # The host cancelled (checked first: fish warns about a >? that fails).
            abbr --erase __mirror_host_identity 2>/dev/null
            return 0
        end
        string match -q 'loaded*' -- "$answer"; or return 0
        commandline -r -- "$text"
        commandline -C (string length -- "$text")
        commandline -f execute
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
        set -g __mirror_host_ready 1
        abbr --erase __mirror_host_identity 2>/dev/null
        if test -n "$__mirror_host_dir"
            # Again at every prompt: switching key bindings drops them.
            for mode in default insert visual
                bind -M $mode \e\[I __mirror_host_take
            end
            __mirror_host_register
        end
    end
    function __mirror_host_preexec --on-event fish_preexec
        set -g __mirror_host_ready 0
        abbr --erase __mirror_host_identity 2>/dev/null
        printf '\e]133;C%s\a' "$__mirror_host_mh"
    end
    function __mirror_host_postexec --on-event fish_postexec
        printf '\e]133;D;%s%s\a' $status "$__mirror_host_mh"
    end
    __mirror_host_register
end
"""

_SNIPPETS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


def snippet(shell: str) -> str:
    """The integration for ``shell`` (``bash``, ``zsh`` or ``fish``).

    Raises:
        KeyError: another shell.
    """
    return _SNIPPETS[shell]


def setup_hint(shell: str) -> str:
    """What a user does to give ``shell`` the integration, in a phrase."""
    if shell == "fish":
        line = "add `mirror-host shell-init fish | source` to ~/.config/fish/config.fish"
    else:
        line = f'add `eval "$(mirror-host shell-init {shell})"` to ~/.{shell}rc'
    return (
        f"{line} and open a new pane; a shell started before the host gets it with `exec {shell}`"
    )
