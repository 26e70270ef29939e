import { describe, expect, it } from 'vitest';
import { nextOccurrence, wallTime } from './schedules';

describe('schedule times', () => {
  it('reads the wall time in the schedule’s own zone, seconds only when set', () => {
    expect(wallTime('2026-11-30T09:00:00+01:00')).toBe('Mon 30 Nov 09:00');
    expect(wallTime('2026-03-29T03:00:00+02:00')).toBe('Sun 29 Mar 03:00');
    expect(wallTime('2026-11-27T22:15:20+00:00')).toBe('Fri 27 Nov 22:15:20');
    expect(wallTime('not a time')).toBe('not a time');
  });

  it('skips occurrences that have passed', () => {
    const upcoming = {
      flow: 'f',
      schedule: 0,
      cron: '* * * * *',
      timezone: 'UTC',
      description: '',
      next: ['2026-11-27T10:00:00+00:00', '2026-11-27T10:01:00+00:00'],
      input: null,
    };
    expect(nextOccurrence(upcoming, Date.parse('2026-11-27T09:59:59Z'))).toBe('2026-11-27T10:00:00+00:00');
    expect(nextOccurrence(upcoming, Date.parse('2026-11-27T10:00:00Z'))).toBe('2026-11-27T10:01:00+00:00');
    expect(nextOccurrence(upcoming, Date.parse('2026-11-27T10:05:00Z'))).toBeNull();
  });
});
