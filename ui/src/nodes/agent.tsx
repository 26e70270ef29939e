// The body of agent nodes: the tokens the model streams in the shown run, as they arrive; when
// the step gave an output without streaming (a pinned output, a replayed answer), that output.

import { useEffect, useRef } from 'react';
import { useRun } from '../hooks';

export function AgentStream({ nodeId }: { nodeId: string }) {
  const streamed = useRun((view) => view.streams[nodeId] ?? '');
  // A step that ended with nothing streamed still has its output to show: "No output yet" under
  // DONE would read as if it gave none.
  const output = useRun((view) => (view.nodeStatus[nodeId] === 'done' ? view.outputs[nodeId] ?? '' : ''));
  const text = streamed !== '' ? streamed : output;
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
      data-source={streamed !== '' ? 'stream' : output !== '' ? 'output' : 'none'}
    >
      {text}
    </div>
  );
}
