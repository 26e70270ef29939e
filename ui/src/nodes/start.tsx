// The body of start nodes whose flow has schedules: when each comes next, and "Run now", which
// runs the flow at once with that schedule's input.

import { useEffect, useState } from 'react';
import { useRun, useSession, useSessionState } from '../hooks';
import { nextOccurrence, wallTime } from '../schedules';

/** How often the shown occurrences are read again, so a passed one gives way to the next. */
const REFRESH_MS = 30_000;

export function StartSchedules({ nodeId }: { nodeId: string }) {
  const session = useSession();
  const upcoming = useSessionState((state) => (state.viewing ? null : state.upcoming));
  // Run is refused while a run goes or the flow has errors: read again as either changes.
  useRun((view) => view.status);
  const blocked = useSessionState(() => session.runBlockedReason());
  const [now, setNow] = useState(() => Date.now());
  const scheduled = upcoming !== null && upcoming.length > 0;

  useEffect(() => {
    if (!scheduled) return;
    const timer = setInterval(() => {
      setNow(Date.now());
      void session.refreshUpcoming();
    }, REFRESH_MS);
    return () => clearInterval(timer);
  }, [scheduled, session]);

  if (!scheduled) return null;
  return (
    <div className="node-schedules nodrag" data-testid={`schedules-${nodeId}`}>
      {upcoming.map((schedule) => {
        const next = nextOccurrence(schedule, now);
        return (
          <div
            key={schedule.schedule}
            className="node-schedule"
            data-testid={`schedule-${schedule.schedule}`}
            title={`${schedule.description} · ${schedule.cron} (${schedule.timezone})\n${schedule.next.map(wallTime).join('\n')}`}
          >
            <span className="schedule-next" data-testid={`schedule-next-${schedule.schedule}`}>
              {next ? `Next ${wallTime(next)}` : 'No occurrence ahead'}
              <span className="schedule-zone"> {schedule.timezone}</span>
            </span>
            <button
              type="button"
              className="button small"
              data-testid={`run-now-${schedule.schedule}`}
              disabled={blocked !== null}
              title={blocked ?? "Runs the flow now with this schedule's input"}
              onClick={() => void session.runSchedule(schedule.schedule)}
            >
              Run now
            </button>
          </div>
        );
      })}
    </div>
  );
}
