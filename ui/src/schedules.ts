// The start node's schedule line: when a schedule comes next, in its own time zone, as a
// person reads a clock there. The backend gives each occurrence in RFC 3339 with the zone's
// offset, so the wall time is read from the text, not converted through the machine's zone.

import type { Upcoming } from './bindings';

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `2026-11-30T09:00:00+01:00` → `Mon 30 Nov 09:00` (seconds shown only when not zero). */
export function wallTime(rfc3339: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})/.exec(rfc3339);
  if (!match) return rfc3339;
  const [, year, month, day, hour, minute, second] = match;
  const weekday = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day))).getUTCDay();
  const time = second === '00' ? `${hour}:${minute}` : `${hour}:${minute}:${second}`;
  return `${WEEKDAYS[weekday]} ${Number(day)} ${MONTHS[Number(month) - 1]} ${time}`;
}

/** The first of a schedule's occurrences still to come at `now` (ms since the epoch). */
export function nextOccurrence(upcoming: Upcoming, now: number): string | null {
  return upcoming.next.find((at) => Date.parse(at) > now) ?? null;
}
