"""Where the fixed-TE overlay may be built: never over files gradgate did not make.

An overlay folder gets a marker file (:data:`MARKER`) when it is claimed; a later build
may replace what is in it only if the marker is there. A folder that exists, is not
empty and has no marker belongs to someone else, and a folder inside the installed
package or inside the folder that holds it (site-packages) would change the installed
TransformerEngine itself: both are refused before anything is written or deleted.

Nothing here imports torch or transformer_engine.
"""

from __future__ import annotations

from pathlib import Path

MARKER = ".gradgate-overlay"
MARKER_TEXT = "This folder is a fixed-TransformerEngine overlay made by `gradgate harness`.\n"


def claim_overlay_root(original_dir: Path, overlay_root: Path) -> None:
    """Check that ``overlay_root`` (resolved) may hold the overlay of the installed package
    ``original_dir`` (resolved), and mark it as gradgate's; raises OverlayError."""
    from .overlay import OverlayError

    install_dir = original_dir.parent
    for protected in (original_dir, install_dir):
        if overlay_root == protected or protected in overlay_root.parents:
            raise OverlayError(
                f"overlay {overlay_root} would overwrite the installed package "
                f"(it lies in {protected}); choose a folder outside it"
            )
    marker = overlay_root / MARKER
    if overlay_root.is_dir() and not marker.is_file() and any(overlay_root.iterdir()):
        raise OverlayError(
            f"overlay folder {overlay_root} exists, is not empty and was not made by gradgate "
            f"(no {MARKER} in it); refusing to replace what is in it: choose a new or empty folder"
        )
    if overlay_root.exists() and not overlay_root.is_dir():
        raise OverlayError(f"overlay location {overlay_root} exists and is not a folder")
    try:
        overlay_root.mkdir(parents=True, exist_ok=True)
        if not marker.is_file():
            with open(marker, "x", encoding="utf-8") as handle:
                handle.write(MARKER_TEXT)
    except OSError as exc:
        raise OverlayError(f"cannot use {overlay_root} for the overlay: {exc.strerror or exc}") from None
