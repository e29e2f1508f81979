/**
 * Keystone's microsecond times. A JS Date holds milliseconds, so a time read from a client carries the
 * microseconds beyond them (0–999) alongside; together they round-trip what Keystone round-trips.
 */
export interface MicrosecondTime {
  date: Date;
  /** The microseconds past `date`'s milliseconds, 0–999. */
  extraMicroseconds: number;
}

// keystone.common.utils.parse_expiration_date: a Z is appended unless the text ends in one, then the
// iso8601 library parses it. So any zone offset (even +00:00) and a date without a time are refused.
const EXPIRATION_DATE =
  /^(\d{4})(?:-(\d{1,2})|(\d{2}))(?:-(\d{1,2})|(\d{2}))[ T](\d{2})(?::?(\d{2}))?(?::?(\d{1,2})(?:[.,](\d+))?)?Z$/;

/** Parses an expiry as Keystone does; null when Keystone answers "Timestamp not in expected format". */
export function parseExpirationDate(text: string): MicrosecondTime | null {
  const match = EXPIRATION_DATE.exec(text.endsWith('Z') ? text : `${text}Z`);
  if (!match) return null;
  const year = Number(match[1]);
  const month = Number(match[2] ?? match[3]);
  const day = Number(match[4] ?? match[5]);
  const hour = Number(match[6]);
  const minute = Number(match[7] ?? 0);
  const second = Number(match[8] ?? 0);
  // Digits past the sixth are dropped, not rounded (Keystone: .9999999 is .999999).
  const microseconds = Number((match[9] ?? '').slice(0, 6).padEnd(6, '0'));
  const milliseconds = Date.UTC(year, month - 1, day, hour, minute, second, Math.floor(microseconds / 1000));
  const date = new Date(milliseconds);
  // Python's datetime refuses out-of-range fields where Date.UTC would carry them over.
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  return { date, extraMicroseconds: microseconds % 1000 };
}

/** Keystone's naive form with six fraction digits and no zone: 2026-11-25T00:03:46.329761. */
export function naiveMicrosecondTime(date: Date, extraMicroseconds: number): string {
  return `${date.toISOString().slice(0, -1)}${String(extraMicroseconds).padStart(3, '0')}`;
}
