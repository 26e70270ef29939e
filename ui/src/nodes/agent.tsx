// The body of agent nodes: the tokens the model streams in the shown run, as they arrive.

import { useEffect, useRef } from 'react';
import { useRun } from '../hooks';

export function AgentStream({ nodeId }: { nodeId: string }) {
  const text = useRun((view) => view.streams[nodeId] ?? '');
  const area = useRef<HTMLDivElement>(null);

  // Keep the newest tokens in sight while they stream in.
  useEffect(() => {
    const element = area.current;
    if (element) element.scrollTop = element.scrollHeight;
  }, [text]);

  return (
    <div
      ref={area}
      className="node-stream nodrag nowheel"
      data-testid={`node-stream-${nodeId}`}
      data-empty={text === '' ? 'true' : 'false'}
    >
      {text}
    </div>
  );
}
