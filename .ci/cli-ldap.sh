#!/usr/bin/env bash
# CI (called by .ci/run with PORT and LDAP_PORT): an LDAP domain through the real openstack CLI. A
# private slapd (test/helpers/ldap-peer) serves the seed's users; the domain is configured with the
# domain config API (the CLI has no command for it), then listed, granted a role, logged into and
# refused a write as Keystone does.
set -euo pipefail
export OS_AUTH_URL=http://127.0.0.1:$PORT/v3 OS_IDENTITY_API_VERSION=3 OS_USERNAME=admin OS_PASSWORD=admin-secret \
  OS_PROJECT_NAME=admin OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default
domain=$(openstack domain create ldap -f value -c id)
token=$(openstack token issue -f value -c id)
config=$(jq -n --arg url "ldap://127.0.0.1:$LDAP_PORT" '{config: {identity: {driver: "ldap"}, ldap: {
  url: $url, user: "cn=admin,dc=example,dc=org", password: "ldap-secret", suffix: "dc=example,dc=org",
  user_tree_dn: "ou=Users,dc=example,dc=org", user_objectclass: "inetOrgPerson", user_id_attribute: "uid",
  user_name_attribute: "uid", user_mail_attribute: "mail", user_enabled_attribute: "employeeType",
  group_tree_dn: "ou=Groups,dc=example,dc=org", group_objectclass: "groupOfNames", group_id_attribute: "cn",
  group_name_attribute: "cn", group_member_attribute: "member"}}}')
curl -sf -o /dev/null -X PUT "http://127.0.0.1:$PORT/v3/domains/$domain/config" -H "X-Auth-Token: $token" \
  -H 'Content-Type: application/json' -d "$config"
users=$(openstack user list --domain ldap -f value -c Name | sort | tr '\n' ' ')
echo "openstack user list --domain ldap: $users"
[ "$users" = "alice bob carol dave eve " ] || { echo "unexpected LDAP users" >&2; exit 1; }
openstack project create --domain default ldap-ci-project >/dev/null
openstack role add --user alice --user-domain ldap --project ldap-ci-project --project-domain default member
openstack role assignment list --user alice --user-domain ldap --names -f value | grep -q '^member ' ||
  { echo "alice's role assignment is missing" >&2; exit 1; }
alice_token=$(OS_USERNAME=alice OS_PASSWORD=alice-secret OS_USER_DOMAIN_NAME=ldap OS_PROJECT_NAME=ldap-ci-project \
  openstack token issue -f value -c id)
[ -n "$alice_token" ] || { echo "alice could not get a token" >&2; exit 1; }
echo "openstack token issue as alice@ldap, project-scoped: ok"
# Read-only: the directory's users cannot be changed (Keystone's generic 403).
if refused=$(openstack user set --domain ldap --description changed alice 2>&1); then
  echo "an LDAP user was changed" >&2; exit 1
fi
grep -q 'HTTP 403' <<<"$refused" || { echo "expected Keystone's 403, got: $refused" >&2; exit 1; }
echo "openstack user set on an LDAP user: 403, as Keystone"

