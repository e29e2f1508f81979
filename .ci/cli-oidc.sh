#!/usr/bin/env bash
# CI (called by .ci/run with PORT and OIDC_PORT): OpenID Connect logins through the real openstack
# CLI. The real OpenID Provider of ../shared/peers/oidc runs on OIDC_PORT; the identity provider, its
# mapping and protocol are registered through the OS-FEDERATION API; then three of keystoneauth's
# plugins get project-scoped federated tokens whose roles come from the mapped groups:
#  - v3oidcpassword (password grant at the provider, Bearer token to our …/auth) for alice;
#  - v3oidcaccesstoken (an access token the client already holds, from the provider's password grant);
#  - v3oidcclientcredentials (client_credentials grant: a service's own token, sub = its client id),
#    mapped by a second rule to the user `keystone` in the group `services`.
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
services=$(openstack group create --domain "$domain" services -f value -c id)
openstack role add --group "$services" --project "$project" reader
# Rule 1: a user's token (alice's groups claim). Rule 2: the keystone client's own token
# (client_credentials: sub = client_id = keystone, no user claims, so rule 1 does not match it).
jq -n --arg domain "$domain" --arg services "$services" '[
  {local: [{user: {id: "{0}", name: "{1}"}}, {groups: "{2}", domain: {id: $domain}}],
   remote: [{type: "HTTP_OIDC_SUB"}, {type: "HTTP_OIDC_PREFERRED_USERNAME"}, {type: "HTTP_OIDC_GROUPS"}]},
  {local: [{user: {id: "{0}", name: "{0}"}}, {group: {id: $services}}],
   remote: [{type: "HTTP_OIDC_CLIENT_ID"}, {type: "HTTP_OIDC_SUB", any_one_of: ["keystone"]}]}]' >"$rules"
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
# What the gateway's validation says of a token: user, project, roles, provider, methods.
check() { # plugin token expected
  local seen
  seen=$(curl -sf "$BASE/v3/auth/tokens" -H "X-Auth-Token: $admin_token" -H "X-Subject-Token: $2" |
    jq -r '[.token.user.name, .token.project.id, ([.token.roles[].name] | sort | join(",")), .token.user["OS-FEDERATION"].identity_provider.id, (.token.methods | sort | join(","))] | join(" ")')
  [ "$seen" = "$3" ] || { echo "$1 token: expected '$3', got '$seen'" >&2; exit 1; }
}
check v3oidcpassword "$token" "alice $project member,reader oidc-idp openid,token"
echo "openstack --os-auth-type v3oidcpassword token issue (a federated project token for alice): ok"

# v3oidcaccesstoken: the access token comes from the provider's password grant (as a client that
# logged alice in would hold it); keystoneauth sends it as the Bearer token.
access_token=$(curl -sf -u keystone:keystone-secret -d grant_type=password -d username=alice -d password=alice-pass \
  -d 'scope=openid groups profile' "$ISSUER/token" | jq -r .access_token)
token=$(openstack --os-auth-type v3oidcaccesstoken --os-identity-provider oidc-idp --os-protocol openid \
  --os-access-token "$access_token" --os-project-id "$project" token issue -f value -c id)
check v3oidcaccesstoken "$token" "alice $project member,reader oidc-idp openid,token"
echo "openstack --os-auth-type v3oidcaccesstoken token issue (a federated project token for alice): ok"
# The catalog and roles of that token through the gateway: the CLI's own calls use it.
roles=$(openstack --os-auth-type v3oidcaccesstoken --os-identity-provider oidc-idp --os-protocol openid \
  --os-access-token "$access_token" --os-project-id "$project" catalog list -f value -c Type | sort | paste -sd,)
case ",$roles," in *,identity,*) ;; *) echo "v3oidcaccesstoken: no identity service in the catalog: '$roles'" >&2; exit 1 ;; esac
# A made-up access token: refused (401), no token.
if openstack --os-auth-type v3oidcaccesstoken --os-identity-provider oidc-idp --os-protocol openid \
  --os-access-token not-a-token --os-project-id "$project" token issue >/dev/null 2>&1; then
  echo "v3oidcaccesstoken: a made-up access token got a token" >&2; exit 1
fi

# v3oidcclientcredentials: the keystone client's own token (no user), mapped to the user `keystone`
# in the services group, which holds reader on the project.
token=$(openstack --os-auth-type v3oidcclientcredentials --os-identity-provider oidc-idp --os-protocol openid \
  --os-client-id keystone --os-client-secret keystone-secret \
  --os-discovery-endpoint "$ISSUER/.well-known/openid-configuration" --os-openid-scope openid \
  --os-project-id "$project" token issue -f value -c id)
check v3oidcclientcredentials "$token" "keystone $project reader oidc-idp openid,token"
echo "openstack --os-auth-type v3oidcclientcredentials token issue (a federated project token for the keystone client): ok"
# A wrong client secret: the provider refuses the grant, no token.
if openstack --os-auth-type v3oidcclientcredentials --os-identity-provider oidc-idp --os-protocol openid \
  --os-client-id keystone --os-client-secret wrong \
  --os-discovery-endpoint "$ISSUER/.well-known/openid-configuration" --os-openid-scope openid \
  --os-project-id "$project" token issue >/dev/null 2>&1; then
  echo "v3oidcclientcredentials: a wrong client secret got a token" >&2; exit 1
fi

# The mapped method of POST /v3/auth/tokens with the real verifier: without an id, the Bearer access
# token is what proves who logs in (a project token at once); with a federated token's id, a rescope.
mapped() { # scope-json [authorization]
  curl -s -o /tmp/cli-oidc-mapped.$$ -w '%{http_code}' -D /tmp/cli-oidc-mapped-headers.$$ "$BASE/v3/auth/tokens" -H 'Content-Type: application/json' ${2:+-H "Authorization: $2"} \
    -d "{\"auth\":{\"identity\":{\"methods\":[\"openid\"],\"openid\":$1},\"scope\":{\"project\":{\"id\":\"$project\"}}}}"
}
status=$(mapped '{"identity_provider":"oidc-idp","protocol":"openid"}' "Bearer $access_token")
[ "$status" = 201 ] || { echo "mapped method with a Bearer access token: $status $(cat /tmp/cli-oidc-mapped.$$)" >&2; exit 1; }
seen=$(jq -r '[.token.user.name, ([.token.roles[].name] | sort | join(",")), (.token.methods | join(","))] | join(" ")' /tmp/cli-oidc-mapped.$$)
[ "$seen" = "alice member,reader openid" ] || { echo "mapped method with a Bearer access token: got '$seen'" >&2; exit 1; }
status=$(mapped '{"identity_provider":"oidc-idp","protocol":"openid"}')
[ "$status" = 401 ] || { echo "mapped method without a Bearer token: expected 401, got $status" >&2; exit 1; }
status=$(mapped '{"identity_provider":"oidc-idp","protocol":"openid"}' "Bearer not-a-token")
[ "$status" = 401 ] || { echo "mapped method with a made-up Bearer token: expected 401, got $status" >&2; exit 1; }
unscoped=$(curl -sf -D - -o /dev/null -X POST "$BASE/v3/OS-FEDERATION/identity_providers/oidc-idp/protocols/openid/auth" \
  -H "Authorization: Bearer $access_token" | awk -F': ' 'tolower($1)=="x-subject-token"{print $2}' | tr -d '\r')
status=$(mapped "{\"id\":\"$unscoped\"}")
[ "$status" = 201 ] || { echo "mapped method with a federated token id: $status $(cat /tmp/cli-oidc-mapped.$$)" >&2; exit 1; }
rm -f /tmp/cli-oidc-mapped.$$ /tmp/cli-oidc-mapped-headers.$$
echo "POST /v3/auth/tokens with the openid method (a Bearer access token; a federated token's id): ok"
