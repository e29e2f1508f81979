#!/usr/bin/env bash
# CI (called by .ci/run with SDK_URL and WORK): the identity tests of the two SDKs most tools are
# built on, unchanged, from Debian's packages, against a running service whose admin password is
# admin-secret (cheap password hashes and no login rate limits: the suites log in many times):
# - openstacksdk's functional identity tests (python3-openstacksdk 0.101: what ansible's openstack
#   collection and the openstack CLI's newer commands call): 49 tests, all must pass. They log in
#   as three clouds (devstack-admin, devstack, devstack-alt); the two users are created here.
# - gophercloud's acceptance identity tests (golang-github-gophercloud-gophercloud-dev 0.12: the Go
#   SDK under terraform's OpenStack provider). Left out, and why: .ci/gophercloud-exclude.txt, the
#   tests the real Keystone 22 fails the same way. Every other test must pass.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${SDK_URL:?the URL of the service}" "${WORK:?a scratch directory}"
GOPHERCLOUD=/usr/share/gocode/src/github.com/gophercloud/gophercloud

need=()
for package in python3-openstacksdk python3-testtools python3-fixtures python3-oslotest golang-go golang-github-gophercloud-gophercloud-dev; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || need+=("$package")
done
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

workspace=$WORK/sdk-suites
rm -rf "$workspace"
mkdir -p "$workspace"

cloud() { # name user password project
  printf '  %s:\n    auth:\n      auth_url: %s/v3\n      username: %s\n      password: %s\n      project_name: %s\n' "$1" "$SDK_URL" "$2" "$3" "$4"
  printf '      user_domain_id: default\n      project_domain_id: default\n    region_name: RegionOne\n    identity_api_version: 3\n'
}
{
  echo 'clouds:'
  cloud devstack-admin admin admin-secret admin
  cloud devstack demo demo-secret demo
  cloud devstack-alt alt_demo alt-demo-secret alt_demo
} >"$workspace/clouds.yaml"
# Only the clouds above: an OS_* setting from the caller would override them.
unset $(env | grep -o '^OS_[A-Z_]*' | grep -vx OS_TEST_TIMEOUT) 2>/dev/null || true
export OS_CLIENT_CONFIG_FILE=$workspace/clouds.yaml OS_CLOUD=devstack-admin
for user in demo alt_demo; do
  password=$([ "$user" = demo ] && echo demo-secret || echo alt-demo-secret)
  openstack project create "$user" >/dev/null
  openstack user create "$user" --password "$password" >/dev/null
  openstack role add --user "$user" --project "$user" member
done

echo "openstacksdk: functional identity tests"
modules=(identity.v3.test_application_credential cloud.test_domain cloud.test_endpoints cloud.test_groups
  cloud.test_identity cloud.test_project cloud.test_services cloud.test_users)
# Debian's python3 (the packages' modules are there), not another python first on PATH. Each test's
# time limit is 5 s unless OS_TEST_TIMEOUT says otherwise: a loaded CI machine is given more.
status=0
(cd "$workspace" && OS_TEST_TIMEOUT=${OS_TEST_TIMEOUT:-60} /usr/bin/python3 -m testtools.run "${modules[@]/#/openstack.tests.functional.}") >"$workspace/openstacksdk.log" 2>&1 || status=$?
ran=$(grep -oP '^Ran \K\d+(?= tests?)' "$workspace/openstacksdk.log" || echo 0)
summary=$(tail -1 "$workspace/openstacksdk.log")
echo "openstacksdk: ran $ran, $summary"
# 49: what openstacksdk 0.101's modules above hold; a run that ran fewer (a module not found) is not a pass.
if ((status != 0)) || [ "$summary" != OK ] || ((ran < 49)); then
  grep -n -A 30 '^\(ERROR\|FAIL\):' "$workspace/openstacksdk.log" | head -200 || tail -40 "$workspace/openstacksdk.log"
  exit 1
fi

echo "gophercloud: acceptance identity tests"
# TestEndpointsNavigateCatalog walks the catalog to a compute service's public endpoint (it is not
# called: nothing listens there). Registered after openstacksdk's tests, which would look for
# flavors at a compute endpoint.
openstack service create --name nova compute >/dev/null
openstack endpoint create --region RegionOne compute public http://127.0.0.1:9/compute/v2.1 >/dev/null
(cd "$GOPHERCLOUD" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$workspace/go-cache \
  go test -tags acceptance -c -o "$workspace/gophercloud-identity.test" ./acceptance/openstack/identity/v3)
excluded=$(grep -v '^\s*\(#\|$\)' "$HERE/gophercloud-exclude.txt" | paste -sd'|')
selected=$("$workspace/gophercloud-identity.test" -test.list '.*' | grep -Ev "^($excluded)$" | paste -sd'|')
status=0
(cd "$GOPHERCLOUD/acceptance/openstack/identity/v3" &&
  OS_AUTH_URL=$SDK_URL/v3 OS_USERNAME=admin OS_PASSWORD=admin-secret OS_PROJECT_NAME=admin OS_DOMAIN_ID=default \
    OS_REGION_NAME=RegionOne "$workspace/gophercloud-identity.test" -test.v -test.run "^($selected)$") \
  >"$workspace/gophercloud.log" 2>&1 || status=$?
passed=$(grep -c '^--- PASS' "$workspace/gophercloud.log" || true)
failed=$(grep -c '^--- FAIL' "$workspace/gophercloud.log" || true)
skipped=$(grep -c '^--- SKIP' "$workspace/gophercloud.log" || true)
echo "gophercloud: $passed passed, $failed failed, $skipped skipped"
# 43: gophercloud 0.12's 46 identity tests less the 3 left out.
if ((status != 0 || failed > 0 || skipped > 0 || passed < 43)); then
  grep -B 30 '^--- FAIL' "$workspace/gophercloud.log" | head -200 || tail -40 "$workspace/gophercloud.log"
  exit 1
fi
