"""A terminal screen on libghostty-vt (through ``pyghostty``). Native, no I/O.

libghostty-vt is the emulator inside both Prowl's host and Herdr, so frames
built here have the structure Prowl's Mac client is written for. A
:class:`Screen` is fed the bytes a program writes and produces:

* the **VT frame**: the active screen only, formatted as VT with
  ``unwrap=false, trim=false``, SGR styles, every non-default mode, keyboard
  modes, the cursor position and pen, and kitty keyboard flags; no scrollback and
  no RIS (the client resets its replica before replaying);
* the **text frame** (``text-v1``): the viewport as Prowl's host reads it for
  phones (``ghostty_surface_read_text``), soft-wrapped lines **joined** (the
  apps reflow text to the phone's width, so a line kept cut at the host's
  column would break mid-word there), trailing blanks left out;
* the **viewport text**: the rows currently in view joined by ``\\n``, and the
  **viewport overlay**: the same rows read one by one the way Prowl reads them
  (``viewport-text-v1``), wrapping kept;
* a **styled archive**: retained rows as VT, for ``styled-scrollback-v1``;
* the **history text**: scrollback plus screen, soft wraps joined;
* viewport scrolling and **scroll bounds**, known only where native scrollback
  makes them certain.

Terminal queries (DSR, DA …) are answered through ``on_reply`` so the program on
the other side of a PTY gets the replies a real terminal would send.

Shells' OSC 133 prompt marks are noted as they are fed (:attr:`Screen.prompt`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyghostty import Terminal, ffi, lib
from pyghostty.core import init_sized

from mirror_host.capture.values import ScrollBounds, StyledArchive, TextCapture, VTCapture
from mirror_host.control import Representation
from mirror_host.errors import GhosttyFailure
from mirror_host.shell.marks import MarkScanner, PromptMarks

__all__ = ["DEFAULT_SCROLLBACK_BYTES", "DEFAULT_SCROLLBACK_LINES", "Cell", "Screen"]

#: Scrollback kept per screen: as much as fits in this memory budget (Ghostty's
#: own default ``scrollback-limit``): about 13,700 lines of an 80-column pane,
#: 5,000 of a 215-column one, fewer of a very wide one …
DEFAULT_SCROLLBACK_BYTES = 10_000_000
#: … and, only as a backstop for very narrow panes, at most this many lines.
#: The byte budget must be what binds: libghostty drops whole pages when it is
#: over its byte budget, but trims row by row when over its line limit, which
#: made a flooding pane (``yes``) feed 4-6 times slower (docs/performance.md).
#: Both are set because libghostty's own byte default is tiny (about 1,100
#: rows of 80 columns).
DEFAULT_SCROLLBACK_LINES = 100_000

#: One cell for fidelity checks: its text and its style's fields, sorted.
Cell = tuple[str, tuple[tuple[str, object], ...]]

# libghostty takes its scroll request as a tagged union passed by value, which
# cffi's ABI mode cannot pass; a struct of the same size and alignment has the
# same calling convention on x86-64 and arm64 (pyghostty does the same for points).
ffi.cdef(
    """
    typedef struct {
        GhosttyTerminalScrollViewportTag tag;
        int64_t delta;
        uint64_t _pad;
    } MirrorHostScrollViewport;
    """
)
assert ffi.sizeof("MirrorHostScrollViewport") == ffi.sizeof("GhosttyTerminalScrollViewport")
_scroll_viewport = ffi.cast(
    "void(*)(GhosttyTerminal, MirrorHostScrollViewport)",
    ffi.addressof(lib, "ghostty_terminal_scroll_viewport"),
)


def _check(result: int, what: str) -> None:
    if result != lib.GHOSTTY_SUCCESS:
        raise GhosttyFailure(f"{what} failed ({result})")


def _content_background(ref: Any) -> tuple[str, object] | None:
    """The colour of a cell that holds only a background, as a style colour."""
    cell = ffi.new("GhosttyCell*")
    _check(lib.ghostty_grid_ref_cell(ref, cell), "cell")
    tag = ffi.new("GhosttyCellContentTag*")
    _check(lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_CONTENT_TAG, tag), "cell tag")
    if tag[0] == lib.GHOSTTY_CELL_CONTENT_BG_COLOR_PALETTE:
        index = ffi.new("GhosttyColorPaletteIndex*")
        _check(lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_COLOR_PALETTE, index), "cell bg")
        return ("palette", int(index[0]))
    if tag[0] == lib.GHOSTTY_CELL_CONTENT_BG_COLOR_RGB:
        rgb = ffi.new("GhosttyColorRgb*")
        _check(lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_COLOR_RGB, rgb), "cell bg")
        return ("rgb", (int(rgb.r), int(rgb.g), int(rgb.b)))
    return None


class Screen:
    """One emulated terminal. Not thread-safe; use from one task."""

    def __init__(
        self,
        columns: int,
        rows: int,
        *,
        scrollback_lines: int = DEFAULT_SCROLLBACK_LINES,
        scrollback_bytes: int = DEFAULT_SCROLLBACK_BYTES,
        on_reply: Callable[[bytes], None] | None = None,
    ) -> None:
        self._terminal = Terminal(cols=columns, rows=rows, scrollback=scrollback_lines)
        self._handle: Any = self._terminal._t[0]
        _check(
            lib.ghostty_terminal_set(
                self._handle,
                lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES,
                ffi.new("size_t*", scrollback_bytes),
            ),
            "set scrollback bytes",
        )
        self._buffer = ffi.new("uint8_t[]", 64 * 1024)
        self._written = ffi.new("size_t*")
        if on_reply is not None:
            self._terminal.on_reply(on_reply)
        self._marks = MarkScanner()
        #: What the shell's OSC 133 prompt marks say.
        self.prompt = PromptMarks()

    # ------------------------------------------------------------ input

    def feed(self, data: bytes) -> None:
        """Process output from the program, noting prompt marks where they fall."""
        if not data:
            return
        self._terminal.feed(data)
        for _end, mark in self._marks.feed(data):
            self.prompt.note(mark)

    def reset(self) -> None:
        """Full reset, as RIS would do."""
        lib.ghostty_terminal_reset(self._handle)
        self.prompt.forget()

    # ------------------------------------------------------------ state

    @property
    def size(self) -> tuple[int, int]:
        """``(columns, rows)``."""
        columns, rows = self._terminal.size
        return int(columns), int(rows)

    @property
    def cursor(self) -> tuple[int, int]:
        """``(x, y)`` of the cursor in the active area, 0-based."""
        x, y = self._terminal.cursor
        return int(x), int(y)

    def mode(self, number: int, *, ansi: bool = False) -> bool:
        """Whether DEC private mode ``number`` (or ANSI mode, with ``ansi``) is set."""
        result: bool = bool(self._terminal.mode(number, ansi=ansi))
        return result

    @property
    def on_alternate_screen(self) -> bool:
        """True while a full-screen program uses the alternate screen."""
        screen = int(self._terminal.get("active_screen"))
        return screen == int(lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE)

    @property
    def mouse_captured(self) -> bool:
        """True while the program asked for mouse reports."""
        return bool(self._terminal.get("mouse_tracking", "bool"))

    @property
    def title(self) -> str | None:
        """The window title set with OSC 0/2, if any."""
        text = ffi.new("GhosttyString*")
        if lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_TITLE, text) != 0:
            return None
        if not text.len:
            return None
        title: str = ffi.buffer(text.ptr, text.len)[:].decode("utf-8", "replace")
        return title

    @property
    def scrollbar(self) -> tuple[int, int, int]:
        """``(total rows, viewport top, viewport rows)``; rows count from the oldest one."""
        bar = ffi.new("GhosttyTerminalScrollbar*")
        _check(
            lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_SCROLLBAR, bar),
            "scrollbar",
        )
        return int(bar.total), int(bar.offset), int(bar.len)

    @property
    def is_scrolled_back(self) -> bool:
        """True when the viewport is away from the live bottom."""
        total, offset, length = self.scrollbar
        return offset + length < total

    def scroll_bounds(self) -> ScrollBounds:
        """Where the viewport is, when that is certain.

        On the alternate screen, or while the program captures the mouse (it may
        scroll itself), the bounds are unknown.
        """
        if self.on_alternate_screen or self.mouse_captured:
            return ScrollBounds()
        total, offset, length = self.scrollbar
        return ScrollBounds(at_top=offset == 0, at_bottom=offset + length >= total)

    # ------------------------------------------------------------ viewport

    def scroll_viewport(self, rows: int) -> None:
        """Move the viewport by ``rows`` (negative = back into history)."""
        request = ffi.new("MirrorHostScrollViewport*")
        request.tag = lib.GHOSTTY_SCROLL_VIEWPORT_DELTA
        request.delta = rows
        _scroll_viewport(self._handle, request[0])

    def scroll_to_bottom(self) -> None:
        """Return the viewport to the live screen (the fake Herdr's ``pane.scroll 0``)."""
        request = ffi.new("MirrorHostScrollViewport*")
        request.tag = lib.GHOSTTY_SCROLL_VIEWPORT_BOTTOM
        _scroll_viewport(self._handle, request[0])

    def scroll_to_top(self) -> None:
        """Move the viewport to the oldest retained row."""
        request = ffi.new("MirrorHostScrollViewport*")
        request.tag = lib.GHOSTTY_SCROLL_VIEWPORT_TOP
        _scroll_viewport(self._handle, request[0])

    # ------------------------------------------------------------ output

    def _selection(self, tag: str) -> Any:
        columns, rows = self.size
        selection = init_sized("GhosttySelection")
        selection.start = self._terminal.ref(0, 0, tag)[0]
        selection.end = self._terminal.ref(columns - 1, rows - 1, tag)[0]
        return selection

    def _format(self, options: Any) -> bytes:
        formatter = ffi.new("GhosttyFormatter*")
        _check(
            lib.ghostty_formatter_terminal_new(ffi.NULL, formatter, self._handle, options[0]),
            "formatter",
        )
        try:
            result = lib.ghostty_formatter_format_buf(
                formatter[0], self._buffer, len(self._buffer), self._written
            )
            if result == lib.GHOSTTY_OUT_OF_SPACE:
                # Grow once to the size libghostty asked for, keep it for next time.
                self._buffer = ffi.new("uint8_t[]", int(self._written[0]) * 2)
                result = lib.ghostty_formatter_format_buf(
                    formatter[0], self._buffer, len(self._buffer), self._written
                )
            _check(result, "format")
            data: bytes = ffi.buffer(self._buffer, self._written[0])[:]
            return data
        finally:
            lib.ghostty_formatter_free(formatter[0])

    def vt_frame(self) -> bytes:
        """The active screen as a full-redraw VT frame (see the module docstring)."""
        return self._vt(self._selection("active"), cursor=True, hyperlink=True)

    def vt_window(self, left: int, top: int, columns: int, rows: int) -> bytes:
        """A rectangle of the active screen as VT: styles and modes, but no cursor
        position (whoever draws it places the cursor relative to the rectangle)."""
        selection = init_sized("GhosttySelection")
        selection.start = self._terminal.ref(left, top, "active")[0]
        selection.end = self._terminal.ref(left + columns - 1, top + rows - 1, "active")[0]
        selection.rectangle = True
        return self._vt(selection, cursor=False, hyperlink=False)

    def _vt(self, selection: Any, *, cursor: bool, hyperlink: bool) -> bytes:
        options = init_sized("GhosttyFormatterTerminalOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
        options.unwrap = False
        options.trim = False
        options.extra.modes = True
        options.extra.keyboard = True
        options.extra.screen.cursor = cursor
        options.extra.screen.style = True
        options.extra.screen.hyperlink = hyperlink
        options.extra.screen.kitty_keyboard = True
        options.selection = selection
        return self._format(options)

    def _plain(self, selection: Any, *, unwrap: bool, trim: bool = True) -> str:
        options = init_sized("GhosttyFormatterTerminalOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        options.unwrap = unwrap
        options.trim = trim
        options.selection = selection
        return self._format(options).decode("utf-8", "replace")

    def viewport_text(self) -> str:
        """The rows in view, one per line (wrapping kept), trailing blanks trimmed."""
        return self._plain(self._selection("viewport"), unwrap=False)

    def text_frame(self) -> str:
        """The viewport as a ``text-v1`` frame carries it: soft-wrapped rows joined
        into their lines (libghostty's wrap flags), trailing blanks trimmed."""
        return self._plain(self._selection("viewport"), unwrap=True)

    def viewport_overlay(self) -> str:
        """The rows in view as Prowl's host and Mac client read them for ``viewport.text``.

        Prowl reads each viewport row on its own (a rectangle, untrimmed) and
        joins exactly ``rows`` of them with ``\\n``; the Mac client compares that
        with its replica before showing a styled archive. One untrimmed,
        unwrapped read of the viewport gives the same rows, except that it
        leaves out trailing empty rows, which are put back here.
        """
        text = self._plain(self._selection("viewport"), unwrap=False, trim=False)
        lines = text.split("\n")
        _, rows = self.size
        return "\n".join(lines + [""] * (rows - len(lines)))

    def archive(self, start: int, stop: int) -> bytes:
        """Rows ``start`` … ``stop - 1`` of scrollback and screen (0 = oldest) as VT.

        This is what Prowl exports for styled scrollback (Ghostty's
        ``write_screen_file`` VT format): SGR-styled text, soft-wrapped rows
        joined so they wrap again on a replica of the same width, cells not
        trimmed, trailing empty rows left out; no modes, no cursor.
        """
        columns, _ = self.size
        selection = init_sized("GhosttySelection")
        selection.start = self._terminal.ref(0, start, "screen")[0]
        selection.end = self._terminal.ref(columns - 1, stop - 1, "screen")[0]
        options = init_sized("GhosttyFormatterTerminalOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_VT
        options.unwrap = True
        options.trim = False
        options.selection = selection
        return self._format(options)

    def active_text(self) -> str:
        """The live screen as plain text, one row per line."""
        return self._plain(self._selection("active"), unwrap=False)

    def history_text(self) -> str:
        """Scrollback and screen as plain text, soft-wrapped lines joined."""
        selection = init_sized("GhosttySelection")
        result = lib.ghostty_terminal_select_all(self._handle, selection)
        if result == lib.GHOSTTY_NO_VALUE:
            return ""
        _check(result, "select_all")
        return self._plain(selection, unwrap=True)

    def capture(
        self,
        representation: Representation,
        *,
        overlay: str | None = None,
        bounds: ScrollBounds | None = None,
        styled: StyledArchive | None = None,
    ) -> VTCapture | TextCapture:
        """This screen as a pane capture.

        ``overlay`` is the text of a viewport scrolled away from the live screen
        (the source knows where that is): phones get it instead of the viewport,
        and a ``vt-v1`` capture carries it as its viewport text, with ``styled``
        as its styled archive. A text frame of this screen itself joins
        soft-wrapped rows (:meth:`text_frame`); VT frames keep the rows.
        """
        columns, rows = self.size
        if representation is Representation.TEXT:
            text = overlay if overlay is not None else self.text_frame()
            return TextCapture(columns=columns, rows=rows, text=text, scroll_bounds=bounds)
        return VTCapture(
            columns=columns,
            rows=rows,
            data=self.vt_frame(),
            viewport_text=overlay,
            scroll_bounds=bounds,
            styled_scrollback=styled,
        )

    def cell(self, x: int, y: int, *, area: str = "active") -> Cell:
        """The text and visible style of one cell (for fidelity checks).

        ``area`` is ``active``, ``viewport`` or ``screen``. A cell erased with a
        background colour holds that colour instead of a style; it is reported
        as the style's ``bg``, since that is what shows.
        """
        ref = self._terminal.ref(x, y, area)
        codepoints = ffi.new("uint32_t[16]")
        count = ffi.new("size_t*")
        result = lib.ghostty_grid_ref_graphemes(ref, codepoints, 16, count)
        text = "" if result != 0 else "".join(chr(codepoints[i]) for i in range(count[0]))
        style: dict[str, object] = self._terminal.style(x, y, area)
        background = _content_background(ref)
        if background is not None:
            style["bg"] = background
        return text, tuple(sorted(style.items()))

    def is_spacer(self, x: int, y: int) -> bool:
        """Whether active cell ``(x, y)`` is the second half of a wide character.

        Asked of the grid rather than worked out from the character before it:
        how wide a cell is depends on the screen's modes (grapheme clustering,
        DEC mode 2027, widens ``❤️``), which no width table can know.
        """
        cell = ffi.new("GhosttyCell*")
        _check(lib.ghostty_grid_ref_cell(self._terminal.ref(x, y, "active"), cell), "cell")
        wide = ffi.new("GhosttyCellWide*")
        _check(lib.ghostty_cell_get(cell[0], lib.GHOSTTY_CELL_DATA_WIDE, wide), "cell wide")
        return bool(wide[0] == lib.GHOSTTY_CELL_WIDE_SPACER_TAIL)

    def continues(self, y: int) -> bool:
        """Whether active row ``y`` is a soft-wrap continuation of the row above it.

        True when text ran past the right edge of row ``y - 1`` and the
        terminal wrapped it here, not when the program moved to a new line.
        """
        row = ffi.new("GhosttyRow*")
        _check(lib.ghostty_grid_ref_row(self._terminal.ref(0, y, "active"), row), "row")
        flag = ffi.new("bool*")
        _check(lib.ghostty_row_get(row[0], lib.GHOSTTY_ROW_DATA_WRAP_CONTINUATION, flag), "row")
        return bool(flag[0])

    def cells(self, *, area: str = "active") -> list[list[Cell]]:
        """Every cell of the active area (or the viewport), row by row."""
        columns, rows = self.size
        return [[self.cell(x, y, area=area) for x in range(columns)] for y in range(rows)]

    def close(self) -> None:
        """Free the native terminal now."""
        self._terminal.close()
