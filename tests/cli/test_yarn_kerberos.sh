# test_yarn_kerberos.sh - the YARN launcher against a ResourceManager that
# asks for Kerberos: the test YARN with DROVER_YARN_KERBEROS=1 (its web
# endpoints behind SPNEGO, a MiniKdc on loopback, a ticket cache of alice
# as `kinit alice` leaves it: tests/yarn/start.sh, Kdc.java). drover
# answers the RM's 401 Negotiate through libcurl's GSS-API from the ticket
# cache, and the application is alice's; without a ticket the start fails
# saying what to do. Skipped as test_yarn.sh is, and where libcurl has no
# SPNEGO.
. tests/cli/lib.sh
# Under `make asan` (SANITIZED=1) the launcher's C paths run in test_yarn.sh;
# this file's JVM-bound cases would only double CI's time.
if [ "${SANITIZED:-0}" = 1 ] && [ "${DROVER_YARN_ASAN:-0}" != 1 ]; then
  echo "SKIP test_yarn_kerberos: the YARN runs under ASan (SANITIZED=1; DROVER_YARN_ASAN=1 runs them)"
  exit 0
fi
RUNS=$TMP/runs
DROVER_YARN_DIR=$TMP/yarn-krb
export DROVER_YARN_DIR
if ! curl -V 2>/dev/null | grep -q SPNEGO; then
  echo "SKIP test_yarn_kerberos: this libcurl has no SPNEGO (GSS-API)"
  exit 0
fi

DROVER_YARN_KERBEROS=1 engine_start yarn "yarn-k00 tests/yarn/start.sh starts a Kerberized test YARN"
. "$DROVER_YARN_DIR/env"
RM=http://$DROVER_YARN_RM
export DROVER_YARN_STAGING=$TMP/staging
mkdir -p "$DROVER_YARN_STAGING"
rm_get() { curl -s -m 5 --negotiate -u : "$RM$1"; }
live_apps() {
  rm_get "/ws/v1/cluster/apps?states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING" |
    grep -o '"id":"application_[0-9_]*"'
}
nothing_left() { [ -z "$(live_apps)" ] && rm_get /ws/v1/cluster/metrics | grep -q '"containersAllocated":0'; }
app_field() {
  rm_get "/ws/v1/cluster/apps/$1" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['app'].get('$2', ''))" 2>/dev/null
}

check "yarn-k00 the RM asks for Kerberos" \
  sh -c "curl -s -i -m 5 '$RM/ws/v1/cluster/info' | grep -qi '^WWW-Authenticate: Negotiate'"

cat > "$TMP/k.lua" <<LUA
local c = drover.cluster { launcher = "yarn", bind = "127.0.0.1", ps = 1, worker = 1,
  runs = "$RUNS", name = os.getenv("RUN_NAME") }
print("answer", c:schedule(function() return 6 * 7 end):fetch())
c:shutdown()
LUA

# yarn-k01: no ticket: the start fails, naming Kerberos and kinit
RUN_NAME=noticket KRB5CCNAME=FILE:$TMP/no-ccache timeout 60 "$DROVER" run "$TMP/k.lua" >"$TMP/none.out" 2>&1
check "yarn-k01 without a ticket the run fails" [ $? -ne 0 ]
check "yarn-k01 saying the RM asks for Kerberos (SPNEGO) and to run kinit" \
  grep -q "the ResourceManager asks for Kerberos (SPNEGO) .*run kinit" "$TMP/none.out"

# yarn-k02: with alice's ticket: the run works, the application is alice's
RUN_NAME=krb timeout 180 "$DROVER" run "$TMP/k.lua" >"$TMP/k.out" 2>&1
check "yarn-k02 with a ticket the run succeeds" [ $? -eq 0 ]
check "yarn-k02 its nodes answer" grep -q "^answer	42" "$TMP/k.out"
dir=$(ls -d "$RUNS"/krb-* | head -n 1)
app=$(sed -n 's/^application\t//p' "$dir/yarn")
check "yarn-k02 the application's user is the ticket's, alice" [ "$(app_field "$app" user)" = alice ]
check "yarn-k02 it FINISHED as SUCCEEDED" [ "$(app_field "$app" finalStatus)" = SUCCEEDED ]
check "yarn-k02 nothing is left in the RM" wait_for 20 nothing_left
