// Where the view goes when a flow is fitted: all of it when its text stays readable, else as
// much as fits at a readable zoom, starting from its left (flows read left to right) and
// panned there rather than shrunk until nothing can be read.

export interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface Viewport {
  x: number;
  y: number;
  zoom: number;
}

/** Below this zoom a node's text is too small to read (about 9 px at 12 px type). */
export const READABLE_FIT_ZOOM = 0.75;
/** A fit never blows a small flow up past this. */
export const MAX_FIT_ZOOM = 1.2;
/** Room around the flow, in screen pixels. */
export const FIT_MARGIN = 40;

/** The viewport that shows `bounds` (flow coordinates) in a pane of `size` pixels. */
export function readableViewport(bounds: Rect, size: { width: number; height: number }): Viewport {
  const room = { width: Math.max(1, size.width - 2 * FIT_MARGIN), height: Math.max(1, size.height - 2 * FIT_MARGIN) };
  const whole = Math.min(room.width / Math.max(1, bounds.width), room.height / Math.max(1, bounds.height));
  const zoom = Math.min(MAX_FIT_ZOOM, Math.max(READABLE_FIT_ZOOM, whole));
  const across = (length: number, pane: number, start: number) =>
    length * zoom <= pane - 2 * FIT_MARGIN
      ? (pane - length * zoom) / 2 - start * zoom // it fits: centred
      : FIT_MARGIN - start * zoom; // it does not: its start at the edge, the rest a pan away
  return {
    x: across(bounds.width, size.width, bounds.x),
    y: across(bounds.height, size.height, bounds.y),
    zoom,
  };
}

/** The smallest rectangle holding every box, or null for none. A loop, not `Math.min(...)`: a
 *  flow's nodes can outnumber the arguments a call may be given. */
export function boundsOf(boxes: Iterable<Rect>): Rect | null {
  let left = Infinity;
  let top = Infinity;
  let right = -Infinity;
  let bottom = -Infinity;
  for (const box of boxes) {
    left = Math.min(left, box.x);
    top = Math.min(top, box.y);
    right = Math.max(right, box.x + box.width);
    bottom = Math.max(bottom, box.y + box.height);
  }
  return left === Infinity ? null : { x: left, y: top, width: right - left, height: bottom - top };
}

/**
 * The view a flow will be fitted at, known before its nodes are measured: when even the
 * corners of its nodes (their positions, sizes left out) do not fit in `size` at a readable
 * zoom, the measured nodes will not either, and the fit is at that zoom from the same corner.
 * Null when the fit depends on the nodes' sizes. Set before the nodes are first laid out, it
 * lets them be laid out once, with their text at the size the fitted zoom gives it.
 */
export function viewportBeforeMeasuring(
  positions: readonly { x: number; y: number }[],
  size: { width: number; height: number },
): Viewport | null {
  if (positions.length < 2) return null;
  const corners = boundsOf(positions.map((position) => ({ ...position, width: 0, height: 0 })));
  const view = corners && readableViewport(corners, size);
  return view?.zoom === READABLE_FIT_ZOOM ? view : null;
}

/** Whether two screen rectangles overlap. */
export function overlaps(a: Rect, b: Rect): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

/** How finely the nodes' text follows the zoom (see `--canvas-zoom` in styles.css). */
const ZOOM_STEPS_PER_UNIT = 20;

/**
 * The zoom the nodes' text is sized for: the view's, rounded down to a step (so that text
 * sized for it reads at least as large as meant on screen, and a zoom lays the text out again
 * only as it passes a step).
 */
export function zoomStep(zoom: number): number {
  return Math.max(1, Math.floor(zoom * ZOOM_STEPS_PER_UNIT + 1e-9)) / ZOOM_STEPS_PER_UNIT;
}
