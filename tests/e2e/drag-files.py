"""A window that files can be dragged from, as from a file manager: the end-to-end tests drag
from it (with xdotool) onto the app to drop files there. Usage: drag-files.py X Y PATH...
It shows a 160x160 window at X, Y offering PATHs as text/uri-list, prints "ready" once shown,
and "ended" when a drag from it ends (after "failed" if nothing took the files)."""

import sys
from pathlib import Path

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402


def main() -> None:
    x, y = int(sys.argv[1]), int(sys.argv[2])
    uris = [Path(path).absolute().as_uri() for path in sys.argv[3:]]
    window = Gtk.Window(title="files to drop")
    window.set_default_size(160, 160)
    window.move(x, y)
    source = Gtk.EventBox()
    source.add(Gtk.Label(label="\n".join(Path(path).name for path in sys.argv[3:])))
    window.add(source)
    source.drag_source_set(
        Gdk.ModifierType.BUTTON1_MASK,
        [Gtk.TargetEntry.new("text/uri-list", 0, 0)],
        Gdk.DragAction.COPY,
    )
    source.connect("drag-data-get", lambda _w, _c, data, _i, _t: data.set_uris(uris))
    source.connect("drag-end", lambda *_: print("ended", flush=True))
    source.connect("drag-failed", lambda *_: print("failed", flush=True))
    window.connect("map-event", lambda *_: print("ready", flush=True))
    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
