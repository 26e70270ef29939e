import { describe, expect, it } from 'vitest';
import type { NodeProps } from '@xyflow/react';
import type { CanvasNode } from '../flowMapping';
import { sameNodeDrawing } from './GenericNode';

const data = { node: { id: 'a', type: 'agent', position: { x: 0, y: 0 }, data: {} } };

function props(extra: Partial<NodeProps<CanvasNode>> = {}): NodeProps<CanvasNode> {
  return {
    id: 'a',
    type: 'agent',
    data,
    selected: false,
    dragging: false,
    zIndex: 0,
    selectable: true,
    deletable: true,
    draggable: true,
    isConnectable: true,
    positionAbsoluteX: 0,
    positionAbsoluteY: 0,
    ...extra,
  } as NodeProps<CanvasNode>;
}

describe('a node drawing', () => {
  it('is not redone for what xyflow measures or moves', () => {
    expect(sameNodeDrawing(props(), props({ width: 220, height: 96 }))).toBe(true);
    expect(sameNodeDrawing(props({ height: 96 }), props({ height: 120 }))).toBe(true);
    expect(sameNodeDrawing(props(), props({ positionAbsoluteX: 40, positionAbsoluteY: 8, dragging: true }))).toBe(true);
  });

  it('is redone for its data, its selection or another node', () => {
    expect(sameNodeDrawing(props(), props({ data: { node: { ...data.node, data: { model: 'x' } } } }))).toBe(false);
    expect(sameNodeDrawing(props(), props({ selected: true }))).toBe(false);
    expect(sameNodeDrawing(props(), props({ id: 'b' }))).toBe(false);
  });
});
