// Moments of the app's start on the page's timeline, read by the app's benchmark
// (tests/e2e/bench.mjs) to say where a start's time goes.

/** Marks `name` on the page's timeline the first time it is reached. */
export function markStartup(name: 'script' | 'kinds' | 'committed' | 'palette'): void {
  const mark = `weft:${name}`;
  if (performance.getEntriesByName(mark, 'mark').length === 0) performance.mark(mark);
}
