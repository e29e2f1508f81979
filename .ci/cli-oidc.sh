#!/usr/bin/env bash
# CI (called by .ci/run with PORT and OIDC_PORT): an OpenID Connect login through the real openstack
# CLI. The real OpenID Provider of ../shared/peers/oidc runs on OIDC_PORT; the identity provider, its
# mapping and protocol are registered through the OS-FEDERATION API; then keystoneauth's
# v3oidcpassword plugin (password grant at the provider, Bearer token to our …/auth) gets a
# project-scoped federated token whose roles come from alice's mapped group.
set -euo pipefail
BASE=http://127.0.0.1:$PORT ISSUER=http://127.0.0.1:$OIDC_PORT
export OS_AUTH_URL=$BASE/v3 OS_IDENTITY_API_VERSION=3 OS_USERNAME=admin OS_PASSWORD=admin-secret \
  OS_PROJECT_NAME=admin OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default
domain=$(openstack domain create oidc-users -f value -c id)
group=$(openstack group create --domain "$domain" developers -f value -c id)
project=$(openstack project create --domain "$domain" oidc-dev -f value -c id)
openstack role add --group "$group" --project "$project" member
openstack identity provider create --remote-id "$ISSUER" --domain "$domain" oidc-idp >/dev/null
rules=$(mktemp)
jq -n --arg domain "$domain" '[{local: [{user: {id: "{0}", name: "{1}"}}, {groups: "{2}", domain: {id: $domain}}],
  remote: [{type: "HTTP_OIDC_SUB"}, {type: "HTTP_OIDC_PREFERRED_USERNAME"}, {type: "HTTP_OIDC_GROUPS"}]}]' >"$rules"
openstack mapping create --rules "$rules" oidc-mapping >/dev/null
rm -f "$rules"
openstack federation protocol create --identity-provider oidc-idp --mapping oidc-mapping openid >/dev/null
unset OS_USERNAME OS_PASSWORD OS_USER_DOMAIN_NAME OS_PROJECT_NAME OS_PROJECT_DOMAIN_NAME
token=$(openstack --os-auth-type v3oidcpassword --os-identity-provider oidc-idp --os-protocol openid \
  --os-client-id keystone --os-client-secret keystone-secret \
  --os-discovery-endpoint "$ISSUER/.well-known/openid-configuration" --os-openid-scope 'openid groups profile' \
  --os-username alice --os-password alice-pass --os-project-id "$project" token issue -f value -c id)
admin_token=$(OS_USERNAME=admin OS_PASSWORD=admin-secret OS_PROJECT_NAME=admin OS_USER_DOMAIN_NAME=Default \
  OS_PROJECT_DOMAIN_NAME=Default openstack token issue -f value -c id)
seen=$(curl -sf "$BASE/v3/auth/tokens" -H "X-Auth-Token: $admin_token" -H "X-Subject-Token: $token" |
  jq -r '[.token.user.name, .token.project.id, ([.token.roles[].name] | sort | join(",")), .token.user["OS-FEDERATION"].identity_provider.id] | join(" ")')
[ "$seen" = "alice $project member,reader oidc-idp" ] || { echo "v3oidcpassword token: expected 'alice $project member,reader oidc-idp', got '$seen'" >&2; exit 1; }
echo "openstack --os-auth-type v3oidcpassword token issue (a federated project token for alice): ok"
