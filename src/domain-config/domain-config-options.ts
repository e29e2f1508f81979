// Keystone's DomainConfigManager: which options a domain's own configuration may hold, and their
// defaults (Keystone 22's [identity] and [ldap] defaults, as GET /v3/domains/config/default answers).
// Listed one by one, as Keystone does, so a new option is never allowed by accident.

/** The options a domain configuration may hold and the API returns, with Keystone's defaults, in its order. */
export const WHITELISTED_OPTIONS: Readonly<Record<string, Readonly<Record<string, unknown>>>> = {
  identity: {
    driver: 'sql',
    list_limit: null,
  },
  ldap: {
    url: 'ldap://localhost',
    user: null,
    suffix: 'cn=example,cn=com',
    query_scope: 'one',
    page_size: 0,
    alias_dereferencing: 'default',
    debug_level: null,
    chase_referrals: null,
    user_tree_dn: null,
    user_filter: null,
    user_objectclass: 'inetOrgPerson',
    user_id_attribute: 'cn',
    user_name_attribute: 'sn',
    user_mail_attribute: 'mail',
    user_description_attribute: 'description',
    user_pass_attribute: 'userPassword',
    user_enabled_attribute: 'enabled',
    user_enabled_invert: false,
    user_enabled_mask: 0,
    user_enabled_default: 'True',
    user_attribute_ignore: ['default_project_id'],
    user_default_project_id_attribute: null,
    user_enabled_emulation: false,
    user_enabled_emulation_dn: null,
    user_enabled_emulation_use_group_config: false,
    user_additional_attribute_mapping: [],
    group_tree_dn: null,
    group_filter: null,
    group_objectclass: 'groupOfNames',
    group_id_attribute: 'cn',
    group_name_attribute: 'ou',
    group_members_are_ids: false,
    group_member_attribute: 'member',
    group_desc_attribute: 'description',
    group_attribute_ignore: [],
    group_additional_attribute_mapping: [],
    tls_cacertfile: null,
    tls_cacertdir: null,
    use_tls: false,
    tls_req_cert: 'demand',
    use_pool: true,
    pool_size: 10,
    pool_retry_max: 3,
    pool_retry_delay: 0.1,
    pool_connection_timeout: -1,
    pool_connection_lifetime: 600,
    use_auth_pool: true,
    auth_pool_size: 100,
    auth_pool_connection_lifetime: 60,
  },
};

/** Options stored but never returned (Keystone's sensitive_config): the LDAP bind password. */
export const SENSITIVE_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  identity: [],
  ldap: ['password'],
};

/** The `security_compliance` options anyone may read for the default domain (the rest are refused). */
export const READABLE_SECURITY_COMPLIANCE: readonly string[] = ['password_regex', 'password_regex_description'];

export function isSupportedGroup(group: string): boolean {
  return Object.hasOwn(WHITELISTED_OPTIONS, group);
}

export function isWhitelisted(group: string, option: string): boolean {
  return isSupportedGroup(group) && Object.hasOwn(WHITELISTED_OPTIONS[group]!, option);
}

export function isSensitive(group: string, option: string): boolean {
  return SENSITIVE_OPTIONS[group]?.includes(option) ?? false;
}
