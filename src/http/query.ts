import { Type, type Static, type TOptional, type TObject, type TUnion, type TString, type TArray } from 'typebox';
import type { StringMatch, StringMatchOperator } from '../store/filters.ts';

// Query strings are declared as schemas of raw strings: fastify gives a parameter as a string, or
// as an array of strings when it is repeated. Keystone reads them leniently (booleans such as
// `enabled=` or `enabled=no`, the last of repeated values, flags that are mere presence), which no
// JSON-schema coercion reproduces, so each route has a typed parse function for its parameters and
// the helpers below do the reading. Parameters a route does not declare are accepted and ignored.

/** One query parameter as parsed: its value, or its values when repeated. */
export const QueryValue = Type.Union([Type.String(), Type.Array(Type.String())]);
export type QueryValue = Static<typeof QueryValue>;

type QueryProperties<K extends string> = { [P in K]: TOptional<TUnion<[TString, TArray<TString>]>> };

/** The schema of a query string whose parameters are `names` (any other is ignored, as Keystone does). */
export function querySchema<K extends string>(...names: K[]): TObject<QueryProperties<K>> {
  const properties = Object.fromEntries(names.map((name) => [name, Type.Optional(QueryValue)])) as QueryProperties<K>;
  return Type.Object(properties, { additionalProperties: true });
}

const OPERATORS = ['contains', 'startswith', 'endswith', 'icontains', 'istartswith', 'iendswith'] as const satisfies readonly StringMatchOperator[];

/** `name` and its inexact forms `name__contains`, … */
export type MatchParameters<A extends string> = A | `${A}__${(typeof OPERATORS)[number]}`;

/** The parameters of Keystone's string filter on `attribute`, for querySchema. */
export function matchParameters<A extends string>(attribute: A): MatchParameters<A>[] {
  return [attribute, ...OPERATORS.map((operator) => `${attribute}__${operator}` as const)];
}

/** A repeated parameter counts with its last value, as in Keystone (webob's `params.get`). */
export function stringParameter(value: QueryValue | undefined): string | undefined {
  return Array.isArray(value) ? value[value.length - 1] : value;
}

/** Keystone's boolean filters: 0, f, false, n, no, off (any case) are false; anything else is true. */
export function booleanFilter(value: QueryValue | undefined): boolean | undefined {
  const text = stringParameter(value);
  if (text === undefined) return undefined;
  return !['0', 'f', 'false', 'n', 'no', 'off'].includes(text.toLowerCase());
}

/** Flags such as `effective` and `include_names`: true when present unless exactly "0". */
export function presenceFlag(value: QueryValue | undefined): boolean {
  const text = stringParameter(value);
  return text !== undefined && text !== '0';
}

/** `allow_expired` is the opposite: true only for 1, true, yes, on, y, t. */
export function truthyFlag(value: QueryValue | undefined): boolean {
  const text = stringParameter(value);
  return text !== undefined && ['1', 'true', 'yes', 'on', 'y', 't'].includes(text.toLowerCase());
}

/** `name`, `name__contains`, … as a list of matches (empty when the filter is absent). */
export function stringMatches<A extends string>(query: { readonly [P in MatchParameters<A>]?: QueryValue }, attribute: A): StringMatch[] {
  const matches: StringMatch[] = [];
  const exact = stringParameter(query[attribute]);
  if (exact !== undefined) matches.push({ operator: 'equals', value: exact });
  for (const operator of OPERATORS) {
    const value = stringParameter(query[`${attribute}__${operator}`]);
    if (value !== undefined) matches.push({ operator, value });
  }
  return matches;
}

/**
 * Like stringMatches, but every value of a repeated parameter is a condition of its own, all of which
 * must hold (Keystone 22's policy list: `?type=a&type=b` matches nothing, `?type=a&type=a` type a).
 */
export function everyStringMatch<A extends string>(query: { readonly [P in MatchParameters<A>]?: QueryValue }, attribute: A): StringMatch[] {
  const matches: StringMatch[] = [];
  const add = (operator: StringMatchOperator, value: QueryValue | undefined) => {
    for (const each of value === undefined ? [] : Array.isArray(value) ? value : [value]) matches.push({ operator, value: each });
  };
  add('equals', query[attribute]);
  for (const operator of OPERATORS) add(operator, query[`${attribute}__${operator}`]);
  return matches;
}

/** Comma-separated list parameter (project tag filters). */
export function listParameter(value: QueryValue | undefined): string[] | undefined {
  const text = stringParameter(value);
  if (text === undefined) return undefined;
  return text.split(',').filter((item) => item.length > 0);
}
