// jsdom lacks the layout APIs @xyflow/react measures nodes with; these stubs let components
// that render a <ReactFlow> mount in tests (sizes are all zero, which is fine there).
class ResizeObserverStub {
  observe(): void {}
  unobserve(): void {}
  disconnect(): void {}
}

class DOMMatrixReadOnlyStub {
  m22: number;
  constructor(transform?: string) {
    const scale = transform?.match(/scale\(([0-9.]+)\)/)?.[1];
    this.m22 = scale !== undefined ? Number(scale) : 1;
  }
}

const scope = globalThis as Record<string, unknown>;
scope.ResizeObserver ??= ResizeObserverStub;
scope.DOMMatrixReadOnly ??= DOMMatrixReadOnlyStub;
// jsdom has no PointerEvent: without one, testing-library's pointer events lose their
// coordinates. A mouse event carries them the same way.
if (typeof scope.PointerEvent === 'undefined' && typeof MouseEvent !== 'undefined') {
  scope.PointerEvent = class PointerEventStub extends MouseEvent {};
}
