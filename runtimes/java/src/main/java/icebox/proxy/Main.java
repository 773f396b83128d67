package icebox.proxy;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Entry point: listens on the UNIX socket named by ICEBOX_PROXY_SOCKET and serves each
 * connection on its own thread. See docs/runtime-protocol.md.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        String socket = System.getenv("ICEBOX_PROXY_SOCKET");
        if (socket == null || socket.isEmpty()) {
            fatal("ICEBOX_PROXY_SOCKET is not set");
        }
        int concurrency = concurrency(System.getenv("ICEBOX_CONCURRENCY"));
        SharingMode sharing = sharing(System.getenv("ICEBOX_SHARING"));
        if (sharing == SharingMode.SHARED) {
            // Before any user code: an action class that keeps System.getenv()'s map sees the
            // per-activation view too.
            try {
                Environment.usePerThreadActivationValues();
            } catch (IllegalStateException e) {
                fatal(e.getMessage());
            }
        }
        Path path = Path.of(socket);
        ServerSocketChannel server;
        try {
            server = listen(path);
        } catch (IOException | RuntimeException e) {
            fatal("cannot listen on " + socket + ": " + Throwables.describe(e));
            return;
        }
        serve(server, new Proxy(concurrency, flag("ICEBOX_EAGER_GC"), sharing));
    }

    static ServerSocketChannel listen(Path path) throws IOException {
        Files.deleteIfExists(path);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(path), 128);
        return server;
    }

    /** Accepts until the server channel is closed. */
    static void serve(ServerSocketChannel server, Proxy proxy) {
        for (;;) {
            SocketChannel channel;
            try {
                channel = server.accept();
            } catch (IOException e) {
                if (!server.isOpen()) {
                    return;
                }
                // Transient (for example too many open files): keep serving the open
                // connections and retry once some are gone, without spinning.
                pause();
                continue;
            }
            Thread thread = new Thread(new Connection(channel, proxy), "icebox-connection");
            // Daemon: the process lives as long as the accept loop, whatever user code is doing.
            thread.setDaemon(true);
            thread.start();
        }
    }

    static int concurrency(String value) {
        if (value == null || value.isEmpty()) {
            return 1;
        }
        try {
            int n = Integer.parseInt(value.trim());
            if (n >= 1) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // Reported below together with out-of-range values.
        }
        fatal("ICEBOX_CONCURRENCY must be a positive integer, got '" + value + "'");
        return 1;
    }

    static SharingMode sharing(String value) {
        try {
            return SharingMode.parse(value);
        } catch (IllegalArgumentException e) {
            fatal(e.getMessage());
            return SharingMode.PROCESS;
        }
    }

    /** A boolean environment variable: unset, empty or "0" is off, "1" is on. */
    static boolean flag(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty() || value.equals("0")) {
            return false;
        }
        if (value.equals("1")) {
            return true;
        }
        fatal(name + " must be 0 or 1, got '" + value + "'");
        return false;
    }

    private static void pause() {
        try {
            Thread.sleep(50);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void fatal(String message) {
        System.err.println("icebox java proxy: " + message);
        System.exit(1);
    }
}
