import { ValidationError } from '../../support/errors.ts';

/**
 * Keystone's `[ldap]` options (the ones this back end reads), with Keystone 22's defaults. Values
 * arrive as the domain config API or a config file holds them: strings ("True", "0") or JSON
 * booleans and numbers, parsed leniently as oslo.config does.
 */
export interface LdapOptions {
  url: string;
  user: string | undefined;
  password: string | undefined;
  suffix: string;
  queryScope: 'one' | 'sub';
  /** 0: no paged results control. */
  pageSize: number;
  userTreeDn: string;
  userObjectclass: string;
  userFilter: string | undefined;
  userIdAttribute: string;
  userNameAttribute: string;
  userMailAttribute: string;
  userDescriptionAttribute: string;
  userPassAttribute: string;
  userEnabledAttribute: string;
  /** Keystone keeps it a string: "True"/"False", or an integer when a mask is used (AD: "512"). */
  userEnabledDefault: string;
  userEnabledMask: number;
  userEnabledInvert: boolean;
  groupTreeDn: string;
  groupObjectclass: string;
  groupFilter: string | undefined;
  groupIdAttribute: string;
  groupNameAttribute: string;
  groupMemberAttribute: string;
  groupMembersAreIds: boolean;
  groupDescAttribute: string;
  useTls: boolean;
  tlsCacertfile: string | undefined;
  tlsReqCert: 'demand' | 'never' | 'allow';
  /** Seconds; Keystone's -1 ("none") is bounded here by DEFAULT_CONNECT_TIMEOUT_MS (see the pool). */
  connectionTimeout: number;
  /** Seconds an LDAP operation may take (not a Keystone option: python-ldap has no such bound). */
  operationTimeout: number;
  /** Pooled admin connections per domain (Keystone's pool_size). */
  poolSize: number;
}

const TRUE_WORDS = new Set(['1', 't', 'true', 'on', 'y', 'yes']);
const FALSE_WORDS = new Set(['0', 'f', 'false', 'off', 'n', 'no']);

function bad(name: string, value: unknown, expected: string): ValidationError {
  return new ValidationError(`Invalid value for option ldap.${name}: ${JSON.stringify(value)} (expected ${expected}).`);
}

/** A typed reader of one option group, as oslo.config types its options. */
class Reader {
  constructor(private readonly group: Record<string, unknown>) {}

  private raw(name: string): unknown {
    const value = this.group[name];
    return value === null ? undefined : value;
  }

  optionalString(name: string): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (typeof value === 'string') return value.trim() === '' ? undefined : value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    throw bad(name, value, 'a string');
  }

  string(name: string, fallback: string): string {
    return this.optionalString(name) ?? fallback;
  }

  boolean(name: string, fallback: boolean): boolean {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (typeof value === 'boolean') return value;
    if (typeof value === 'number' && (value === 0 || value === 1)) return value === 1;
    if (typeof value === 'string') {
      const word = value.trim().toLowerCase();
      if (TRUE_WORDS.has(word)) return true;
      if (FALSE_WORDS.has(word)) return false;
    }
    throw bad(name, value, 'a boolean');
  }

  number(name: string, fallback: number, { min, integer = true }: { min?: number; integer?: boolean } = {}): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    const parsed = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value.trim()) : Number.NaN;
    if (!Number.isFinite(parsed) || (integer && !Number.isInteger(parsed)) || (min !== undefined && parsed < min)) {
      throw bad(name, value, `${integer ? 'an integer' : 'a number'}${min === undefined ? '' : ` >= ${min}`}`);
    }
    return parsed;
  }

  choice<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    const value = this.optionalString(name);
    if (value === undefined) return fallback;
    const found = choices.find((choice) => choice === value.trim().toLowerCase());
    if (!found) throw bad(name, value, `one of ${choices.join(', ')}`);
    return found;
  }
}

/** The `[ldap]` group of a domain's configuration as typed options; a bad value is a ValidationError. */
export function parseLdapOptions(group: Record<string, unknown>): LdapOptions {
  const read = new Reader(group);
  const suffix = read.string('suffix', 'cn=example,cn=com');
  const url = read.string('url', 'ldap://localhost');
  if (!/^ldaps?:\/\/[^\s]+$/i.test(url.split(',')[0]!.trim())) throw bad('url', url, 'an ldap:// or ldaps:// URL');
  const options: LdapOptions = {
    // Keystone accepts a comma-separated list of URLs; the first is used here.
    url: url.split(',')[0]!.trim(),
    user: read.optionalString('user'),
    password: read.optionalString('password'),
    suffix,
    queryScope: read.choice('query_scope', ['one', 'sub'] as const, 'one'),
    pageSize: read.number('page_size', 0, { min: 0 }),
    userTreeDn: read.string('user_tree_dn', `ou=Users,${suffix}`),
    userObjectclass: read.string('user_objectclass', 'inetOrgPerson'),
    userFilter: read.optionalString('user_filter'),
    userIdAttribute: read.string('user_id_attribute', 'cn'),
    userNameAttribute: read.string('user_name_attribute', 'sn'),
    userMailAttribute: read.string('user_mail_attribute', 'mail'),
    userDescriptionAttribute: read.string('user_description_attribute', 'description'),
    userPassAttribute: read.string('user_pass_attribute', 'userPassword'),
    userEnabledAttribute: read.string('user_enabled_attribute', 'enabled'),
    userEnabledDefault: read.string('user_enabled_default', 'True'),
    userEnabledMask: read.number('user_enabled_mask', 0, { min: 0 }),
    userEnabledInvert: read.boolean('user_enabled_invert', false),
    groupTreeDn: read.string('group_tree_dn', `ou=UserGroups,${suffix}`),
    groupObjectclass: read.string('group_objectclass', 'groupOfNames'),
    groupFilter: read.optionalString('group_filter'),
    groupIdAttribute: read.string('group_id_attribute', 'cn'),
    groupNameAttribute: read.string('group_name_attribute', 'ou'),
    groupMemberAttribute: read.string('group_member_attribute', 'member'),
    groupMembersAreIds: read.boolean('group_members_are_ids', false),
    groupDescAttribute: read.string('group_desc_attribute', 'description'),
    useTls: read.boolean('use_tls', false),
    tlsCacertfile: read.optionalString('tls_cacertfile'),
    tlsReqCert: read.choice('tls_req_cert', ['demand', 'never', 'allow'] as const, 'demand'),
    connectionTimeout: read.number('connection_timeout', -1, { min: -1, integer: false }),
    operationTimeout: read.number('operation_timeout', 10, { min: 0, integer: false }),
    poolSize: read.number('pool_size', 10, { min: 1 }),
  };
  if (options.useTls && /^ldaps:/i.test(options.url)) {
    throw new ValidationError('Invalid LDAP TLS_AVAIL option: use_tls and an ldaps:// URL cannot both be set.');
  }
  if (options.userEnabledMask > 0 && !Number.isInteger(Number(options.userEnabledDefault))) {
    throw bad('user_enabled_default', options.userEnabledDefault, 'an integer when user_enabled_mask is set');
  }
  return options;
}
