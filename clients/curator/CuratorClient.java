import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Apache Curator's InterProcessMutex (Debian's libcurator-recipes-java), driven over the
 * lock-harness protocol, used as Curator's documentation says: one CuratorFramework (one
 * ZooKeeper session, its timeout the run's TTL), a ConnectionStateListener that treats
 * SUSPENDED and LOST as "the lock may be gone" (held() says no from then on), acquire with a
 * timeout, release. The fencing token is the lock znode's sequence number (the recipe grants
 * in sequence order). The ensemble tracker is off: it would replace the connection string
 * (the harness's relays) with the servers' own addresses.
 */
public final class CuratorClient implements Protocol.Client {
    /** InterProcessMutex with its lock znode's path in reach (getLockPath is protected). */
    static final class TokenMutex extends InterProcessMutex {
        TokenMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockPath() {
            return getLockPath();
        }
    }

    static final class Grant {
        final TokenMutex mutex;
        volatile boolean lost;

        Grant(TokenMutex mutex) {
            this.mutex = mutex;
        }
    }

    private final CuratorFramework client;
    private final String path;
    private final Map<Long, Grant> grants = new ConcurrentHashMap<>();
    private long next;

    CuratorClient(CuratorFramework client, String path) {
        this.client = client;
        this.path = path;
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                grants.values().forEach(g -> g.lost = true);
                Protocol.log("connection " + state + ": every grant counts as lost");
            }
        });
    }

    @Override
    public Map<String, Object> describe() {
        return Protocol.reply("ok", "name", "curator", "version", curatorVersion(), "tokens", true,
                "features", List.of("held"));
    }

    @Override
    public Map<String, Object> handle(String op, Map<String, Object> request) throws Exception {
        switch (op) {
            case "acquire": {
                long millis = Math.round(((Number) request.get("timeout")).doubleValue() * 1000);
                TokenMutex mutex = new TokenMutex(client, path);
                if (!mutex.acquire(millis, TimeUnit.MILLISECONDS)) {
                    return Protocol.reply("fail", "error", "timeout: lock busy");
                }
                String node = mutex.lockPath();
                long token = Long.parseLong(node.substring(node.length() - 10));
                long handle = ++next;
                grants.put(handle, new Grant(mutex));
                return Protocol.reply("ok", "token", token, "handle", handle);
            }
            case "release": {
                Grant g = grants.remove(((Number) request.get("handle")).longValue());
                if (g == null) {
                    return Protocol.reply("info", "error", "no such grant here");
                }
                try {
                    g.mutex.release();
                } catch (IllegalMonitorStateException e) {
                    return Protocol.reply("fail", "error", e.getMessage());
                }
                return Protocol.reply("ok");
            }
            case "held": {
                Grant g = grants.get(((Number) request.get("handle")).longValue());
                boolean held = g != null && !g.lost && client.getZookeeperClient().isConnected();
                return Protocol.reply("ok", "held", held);
            }
            default:
                return Protocol.reply("info", "error", "no op " + op);
        }
    }

    /** Curator's version, from the pom.properties Maven left in the jar. */
    static String curatorVersion() {
        try (java.io.InputStream in = InterProcessMutex.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            java.util.Properties pom = new java.util.Properties();
            pom.load(in);
            return pom.getProperty("version", "?");
        } catch (Exception e) {
            return "?";
        }
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        Protocol.serve(hello -> {
            List<String> hosts = new ArrayList<>();
            for (Object n : (List<Object>) hello.get("nodes")) {
                Map<String, Object> node = (Map<String, Object>) n;
                hosts.add(node.get("host") + ":" + node.get("port"));
            }
            int sessionMs = (int) Math.round(((Number) hello.get("ttl")).doubleValue() * 1000);
            int connectMs = (int) Math.round(((Number) hello.get("op_timeout")).doubleValue() * 1000);
            CuratorFramework client = CuratorFrameworkFactory.builder()
                    .connectString(String.join(",", hosts))
                    .sessionTimeoutMs(sessionMs)
                    .connectionTimeoutMs(Math.min(connectMs, sessionMs))
                    .retryPolicy(new ExponentialBackoffRetry(50, 3, 500))
                    .ensembleTracker(false)
                    .build();
            client.start();
            if (!client.blockUntilConnected(5, TimeUnit.SECONDS)) {
                Protocol.log("not connected after 5 s; going on (ops will say)");
            }
            return new CuratorClient(client, "/curator/locks/" + hello.get("lock"));
        });
    }
}
