package drover.yarn;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Properties;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.kerby.kerberos.kerb.client.KrbClient;

/**
 * A Kerberos realm for the test YARN (DROVER_YARN_KERBEROS=1): Hadoop's
 * MiniKdc on loopback, and the cluster's web endpoints, the RM's REST API
 * among them, behind SPNEGO (hadoop.http.authentication.type = kerberos)
 * as on a secure cluster. Its RPC stays simple: what is tested is how a
 * client of the REST API authenticates.
 *
 * Writes under DIR: krb5.conf, for MIT Kerberos clients (libcurl's
 * GSS-API: KRB5_CONFIG), http.keytab (HTTP/127.0.0.1, the RM's), and
 * ccache, a ticket cache holding a TGT of alice@EXAMPLE.COM (KRB5CCNAME),
 * got with the KDC's own client: what `kinit alice` gives a user.
 */
final class Kdc {
  static final String USER = "alice", PASSWORD = "secret";

  static void secure(Configuration conf, File dir) throws Exception {
    dir.mkdirs();
    Properties p = MiniKdc.createConf();
    p.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    MiniKdc kdc = new MiniKdc(p, dir);
    kdc.start(); // sets java.security.krb5.conf for this JVM's side
    File keytab = new File(dir, "http.keytab");
    // The name libcurl asks a ticket for: HTTP@ the URL's host.
    kdc.createPrincipal(keytab, "HTTP/127.0.0.1");
    kdc.createPrincipal(USER, PASSWORD);
    String realm = kdc.getRealm();
    // MIT's library must not turn 127.0.0.1 into a host name, and speaks
    // TCP to the KDC (MiniKdc's transport).
    String krb5 = "[libdefaults]\n default_realm = " + realm + "\n dns_canonicalize_hostname = false\n"
        + " rdns = false\n udp_preference_limit = 1\n dns_lookup_kdc = false\n[realms]\n " + realm
        + " = {\n  kdc = 127.0.0.1:" + kdc.getPort() + "\n }\n";
    Files.write(new File(dir, "krb5.conf").toPath(), krb5.getBytes(StandardCharsets.UTF_8));
    KrbClient client = new KrbClient();
    client.setKdcRealm(realm);
    client.setKdcHost("127.0.0.1");
    client.setKdcTcpPort(kdc.getPort());
    client.setAllowUdp(false);
    client.setAllowTcp(true);
    client.init();
    client.storeTicket(client.requestTgt(USER + "@" + realm, PASSWORD), new File(dir, "ccache"));
    conf.set("hadoop.http.authentication.type", "kerberos");
    conf.set("hadoop.http.authentication.kerberos.principal", "HTTP/127.0.0.1@" + realm);
    conf.set("hadoop.http.authentication.kerberos.keytab", keytab.getPath());
    System.err.println("TestCluster: Kerberos realm " + realm + " (KDC 127.0.0.1:" + kdc.getPort()
        + "), the web endpoints behind SPNEGO");
  }
}
