import type { StringMatch, StringMatchOperator } from '../store/filters.ts';

export type Query = Record<string, string | string[] | undefined>;

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[value.length - 1] : value;
}

/** Keystone's boolean filters: 0, f, false, n, no, off (any case) are false; anything else is true. */
export function booleanFilter(query: Query, name: string): boolean | undefined {
  const value = single(query[name]);
  if (value === undefined) return undefined;
  return !['0', 'f', 'false', 'n', 'no', 'off'].includes(value.toLowerCase());
}

/** Flags such as `effective` and `include_names`: true when present unless exactly "0". */
export function presenceFlag(query: Query, name: string): boolean {
  const value = single(query[name]);
  return value !== undefined && value !== '0';
}

/** `allow_expired` is the opposite: true only for 1, true, yes, on, y, t. */
export function truthyFlag(query: Query, name: string): boolean {
  const value = single(query[name]);
  return value !== undefined && ['1', 'true', 'yes', 'on', 'y', 't'].includes(value.toLowerCase());
}

export function stringParameter(query: Query, name: string): string | undefined {
  return single(query[name]);
}

const OPERATORS: StringMatchOperator[] = ['contains', 'startswith', 'endswith', 'icontains', 'istartswith', 'iendswith'];

/** `name`, `name__contains`, … as a list of matches (empty when the filter is absent). */
export function stringMatches(query: Query, attribute: string): StringMatch[] {
  const matches: StringMatch[] = [];
  const exact = single(query[attribute]);
  if (exact !== undefined) matches.push({ operator: 'equals', value: exact });
  for (const operator of OPERATORS) {
    const value = single(query[`${attribute}__${operator}`]);
    if (value !== undefined) matches.push({ operator, value });
  }
  return matches;
}

/** Comma-separated list parameter (project tag filters). */
export function listParameter(query: Query, name: string): string[] | undefined {
  const value = single(query[name]);
  if (value === undefined) return undefined;
  return value.split(',').filter((item) => item.length > 0);
}
