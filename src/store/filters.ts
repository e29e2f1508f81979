import { ForeignKeyConstraintViolationException, UniqueConstraintViolationException } from '@mikro-orm/core';

/** Keystone's exact and inexact string filters (`name`, `name__icontains`, …). */
export type StringMatchOperator =
  | 'equals'
  | 'contains'
  | 'startswith'
  | 'endswith'
  | 'icontains'
  | 'istartswith'
  | 'iendswith';

export interface StringMatch {
  operator: StringMatchOperator;
  value: string;
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (character) => `\\${character}`);
}

/** MikroORM conditions for one property, to be ANDed into a query's `$and` list. */
export function stringConditions(property: string, matches: StringMatch[]): Record<string, unknown>[] {
  return matches.map((match) => ({ [property]: columnCondition(match) }));
}

function columnCondition(match: StringMatch): Record<string, unknown> {
  const escaped = escapeLike(match.value);
  switch (match.operator) {
    case 'equals':
      return { $eq: match.value };
    case 'contains':
      return { $like: `%${escaped}%` };
    case 'startswith':
      return { $like: `${escaped}%` };
    case 'endswith':
      return { $like: `%${escaped}` };
    case 'icontains':
      return { $ilike: `%${escaped}%` };
    case 'istartswith':
      return { $ilike: `${escaped}%` };
    case 'iendswith':
      return { $ilike: `%${escaped}` };
  }
}

/** Applies the match in memory (for lists that are assembled, not queried). */
export function matchesString(value: string, matches: StringMatch[]): boolean {
  return matches.every((match) => {
    const lowerValue = value.toLowerCase();
    const lowerWanted = match.value.toLowerCase();
    switch (match.operator) {
      case 'equals':
        return value === match.value;
      case 'contains':
        return value.includes(match.value);
      case 'startswith':
        return value.startsWith(match.value);
      case 'endswith':
        return value.endsWith(match.value);
      case 'icontains':
        return lowerValue.includes(lowerWanted);
      case 'istartswith':
        return lowerValue.startsWith(lowerWanted);
      case 'iendswith':
        return lowerValue.endsWith(lowerWanted);
    }
  });
}

export function isUniqueViolation(error: unknown): boolean {
  return error instanceof UniqueConstraintViolationException;
}

export function isForeignKeyViolation(error: unknown): boolean {
  return error instanceof ForeignKeyConstraintViolationException;
}
