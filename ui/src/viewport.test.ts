import { describe, expect, it } from 'vitest';
import {
  FIT_MARGIN,
  MAX_FIT_ZOOM,
  READABLE_FIT_ZOOM,
  boundsOf,
  overlaps,
  readableViewport,
  viewportBeforeMeasuring,
  zoomStep,
} from './viewport';

describe('readableViewport', () => {
  const pane = { width: 770, height: 530 };

  it('shows a small flow whole and centred, never blown up past the cap', () => {
    const view = readableViewport({ x: 0, y: 0, width: 300, height: 100 }, pane);
    expect(view.zoom).toBe(MAX_FIT_ZOOM);
    expect(view.x).toBeCloseTo((770 - 300 * MAX_FIT_ZOOM) / 2);
    expect(view.y).toBeCloseTo((530 - 100 * MAX_FIT_ZOOM) / 2);
  });

  it('pans instead of shrinking a wide flow past the readable zoom, starting at its left', () => {
    // Six layers of nodes in one row are about 1,500 px wide: a plain fit would be ~0.47.
    const view = readableViewport({ x: -20, y: 0, width: 1500, height: 400 }, pane);
    expect(view.zoom).toBe(READABLE_FIT_ZOOM);
    expect(view.x).toBeCloseTo(FIT_MARGIN + 20 * READABLE_FIT_ZOOM);
    // Vertically it fits at that zoom: centred.
    expect(view.y).toBeCloseTo((530 - 400 * READABLE_FIT_ZOOM) / 2);
  });

  it('tells overlapping rectangles apart', () => {
    expect(overlaps({ x: 0, y: 0, width: 10, height: 10 }, { x: 5, y: 5, width: 10, height: 10 })).toBe(true);
    expect(overlaps({ x: 0, y: 0, width: 10, height: 10 }, { x: 10, y: 0, width: 10, height: 10 })).toBe(false);
  });

  it('sizes node text for the zoom rounded down to a step, so it never reads smaller than meant', () => {
    expect(zoomStep(READABLE_FIT_ZOOM)).toBe(0.75);
    expect(zoomStep(0.7522)).toBe(0.75);
    expect(zoomStep(0.7999)).toBe(0.75);
    expect(zoomStep(0.8)).toBe(0.8);
    expect(zoomStep(1.2)).toBe(1.2);
    expect(zoomStep(0.01)).toBe(0.05);
    // Text sized as 11 px / step shows at 11 px or more at the zoom itself.
    for (const zoom of [0.75, 0.7523, 0.79, 0.81, 0.849]) expect((11 / zoomStep(zoom)) * zoom).toBeGreaterThanOrEqual(11);
  });
});

describe('viewportBeforeMeasuring', () => {
  const pane = { width: 770, height: 530 };
  /** A grid of `count` nodes, 40 to a row, 220 px apart across and 140 down. */
  const grid = (count: number) => Array.from({ length: count }, (_, i) => ({ x: (i % 40) * 220, y: Math.floor(i / 40) * 140 }));

  it('knows the fit of a flow too big to show readably before its nodes are measured', () => {
    const positions = grid(1000);
    const early = viewportBeforeMeasuring(positions, pane);
    expect(early).not.toBeNull();
    // What the fit gives once the nodes have sizes (here 180 by 80): the same zoom and corner,
    // so the nodes' text is laid out for that zoom once.
    const measured = readableViewport({ x: 0, y: 0, width: 39 * 220 + 180, height: 24 * 140 + 80 }, pane);
    expect(early).toEqual(measured);
    expect(zoomStep(early!.zoom)).toBe(zoomStep(measured.zoom));
  });

  it('leaves a flow whose fit depends on its nodes\' sizes to the fit after measuring', () => {
    // Three nodes in a row fit whole at more than the readable zoom.
    expect(viewportBeforeMeasuring(grid(3), pane)).toBeNull();
    // One node, or none, is placed at natural size elsewhere.
    expect(viewportBeforeMeasuring(grid(1), pane)).toBeNull();
    expect(viewportBeforeMeasuring([], pane)).toBeNull();
  });
});

describe('boundsOf', () => {
  it('holds every box, and is nothing for no boxes', () => {
    const boxes = [
      { x: 10, y: -5, width: 100, height: 40 },
      { x: -20, y: 30, width: 50, height: 50 },
    ];
    expect(boundsOf(boxes)).toEqual({ x: -20, y: -5, width: 130, height: 85 });
    expect(boundsOf([])).toBeNull();
  });

  it('takes more boxes than a call takes arguments (a spread into Math.min throws there)', () => {
    const many = Array.from({ length: 300_000 }, (_, i) => ({ x: i, y: -i, width: 0, height: 0 }));
    expect(boundsOf(many)).toEqual({ x: 0, y: -299_999, width: 299_999, height: 299_999 });
    expect(viewportBeforeMeasuring(many, { width: 770, height: 530 })?.zoom).toBe(READABLE_FIT_ZOOM);
  });
});
