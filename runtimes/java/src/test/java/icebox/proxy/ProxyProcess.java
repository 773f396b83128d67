package icebox.proxy;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The real proxy in a child JVM, started with the JVM options of runtime.json (the built classes
 * on the class path instead of the packaged jar, which does not exist yet when tests run).
 */
final class ProxyProcess implements AutoCloseable {
    final Path dir;
    final Path socket;
    final Process process;

    static {
        // Should the test JVM be stopped early (a Surefire timeout, Ctrl-C), no proxy outlives it.
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
                ProcessHandle.current().children().forEach(ProcessHandle::destroyForcibly)));
    }

    private ProxyProcess(Path dir, Path socket, Process process) {
        this.dir = dir;
        this.socket = socket;
        this.process = process;
    }

    static ProxyProcess start() {
        return start(Map.of());
    }

    static ProxyProcess start(Map<String, String> env) {
        ProxyProcess proxy = launch(env, true, false);
        proxy.awaitAccepting();
        return proxy;
    }

    /**
     * Starts a proxy with runtime.json's JVM options minus {@code drop}, plus {@code add}
     * (for example another collector).
     */
    static ProxyProcess startWithJvmOptions(List<String> drop, List<String> add) {
        ProxyProcess proxy = launch(Map.of(), true, false, drop, add);
        proxy.awaitAccepting();
        return proxy;
    }

    /** Starts a proxy whose socket path holds the socket file of a listener that is gone. */
    static ProxyProcess startOverStaleSocket() {
        ProxyProcess proxy = launch(Map.of(), true, true);
        proxy.awaitAccepting();
        return proxy;
    }

    /**
     * Starts the process without waiting for the socket.
     *
     * @param withSocket whether to set ICEBOX_PROXY_SOCKET
     * @param staleSocket whether to leave a dead socket file at the path first
     */
    static ProxyProcess launch(Map<String, String> env, boolean withSocket,
            boolean staleSocket) {
        return launch(env, withSocket, staleSocket, List.of(), List.of());
    }

    private static ProxyProcess launch(Map<String, String> env, boolean withSocket,
            boolean staleSocket, List<String> drop, List<String> add) {
        Path dir = null;
        try {
            dir = Files.createTempDirectory("icebox-proxy-test");
            Path socket = dir.resolve("proxy.sock");
            if (staleSocket) {
                // Closing a listening UNIX channel leaves its file behind, as a crash does.
                try (ServerSocketChannel dead = ServerSocketChannel.open(
                        StandardProtocolFamily.UNIX)) {
                    dead.bind(UnixDomainSocketAddress.of(socket));
                }
            }
            ProcessBuilder pb = new ProcessBuilder(command(dir, drop, add))
                    .directory(dir.toFile())
                    .redirectOutput(dir.resolve("stdout").toFile())
                    .redirectError(dir.resolve("stderr").toFile());
            pb.environment().remove("ICEBOX_PROXY_SOCKET");
            pb.environment().remove("ICEBOX_CONCURRENCY");
            pb.environment().remove("ICEBOX_SHARING");
            if (withSocket) {
                pb.environment().put("ICEBOX_PROXY_SOCKET", socket.toString());
            }
            pb.environment().putAll(env);
            return new ProxyProcess(dir, socket, pb.start());
        } catch (IOException e) {
            TestJars.deleteTree(dir);
            throw new UncheckedIOException(e);
        }
    }

    private static List<String> command(Path dir, List<String> drop, List<String> add)
            throws IOException {
        Path runtimeDir = Path.of(System.getProperty("basedir", "")).toAbsolutePath();
        JsonObject spec = JsonParser.parseString(
                Files.readString(runtimeDir.resolve("runtime.json"))).getAsJsonObject();
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<JsonElement> args = spec.getAsJsonArray("command").asList();
        for (int i = 1; i < args.size(); i++) {
            String arg = args.get(i).getAsString();
            if (drop.contains(arg)) {
                continue;
            }
            if (arg.equals("-jar")) {
                command.addAll(add);
                // The action jar goes to java.io.tmpdir, which in a sandbox is the private
                // /tmp; here it is the per-test directory, deleted afterwards.
                command.add("-Djava.io.tmpdir=" + dir);
                command.add("-cp");
                command.add(TestJars.proxyClasses() + java.io.File.pathSeparator
                        + TestJars.gson());
                command.add(Main.class.getName());
                break;
            }
            command.add(arg.replace("{runtime_dir}", runtimeDir.toString()));
        }
        return command;
    }

    private void awaitAccepting() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                String err = stderr();
                close();
                throw new IllegalStateException("proxy exited early: " + err);
            }
            try {
                SocketChannel.open(UnixDomainSocketAddress.of(socket)).close();
                return;
            } catch (IOException notYet) {
                sleep(10);
            }
        }
        close();
        throw new IllegalStateException("proxy did not accept connections within 30 s");
    }

    /** One request on a fresh connection. */
    Reply request(String method, String path, String body) {
        try (Client client = connect()) {
            return client.send(method, path, body);
        }
    }

    Reply init(String main, byte[] jar) {
        JsonObject value = new JsonObject();
        value.addProperty("main", main);
        value.addProperty("binary", true);
        value.addProperty("code", Base64.getEncoder().encodeToString(jar));
        return init(value);
    }

    Reply init(JsonObject value) {
        JsonObject body = new JsonObject();
        body.add("value", value);
        return request("POST", "/init", body.toString());
    }

    Reply run(JsonObject value) {
        JsonObject body = new JsonObject();
        body.add("value", value);
        return request("POST", "/run", body.toString());
    }

    Client connect() {
        try {
            SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            ch.connect(UnixDomainSocketAddress.of(socket));
            return new Client(ch);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    String stdout() {
        return read("stdout");
    }

    String stderr() {
        return read("stderr");
    }

    private String read(String name) {
        try {
            return Files.readString(dir.resolve(name));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    int waitForExit() {
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("proxy did not exit");
            }
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        process.destroyForcibly();
        try {
            process.waitFor(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        TestJars.deleteTree(dir);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** A parsed response. */
    record Reply(int status, Map<String, String> headers, String body) {
        JsonObject json() {
            return JsonParser.parseString(body).getAsJsonObject();
        }

        String error() {
            return json().get("error").getAsString();
        }
    }

    /** An HTTP/1.1 client connection to the proxy that can carry several requests. */
    static final class Client implements AutoCloseable {
        private final SocketChannel channel;
        private final InputStream in;
        private final OutputStream out;

        Client(SocketChannel channel) {
            this.channel = channel;
            this.in = Channels.newInputStream(channel);
            this.out = Channels.newOutputStream(channel);
        }

        Reply send(String method, String path, String body) {
            byte[] payload = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
            String head = method + " " + path + " HTTP/1.1\r\nHost: icebox\r\n"
                    + "Content-Type: application/json\r\nContent-Length: " + payload.length
                    + "\r\n\r\n";
            return sendRaw(concat(head.getBytes(StandardCharsets.US_ASCII), payload));
        }

        Reply sendRaw(byte[] request) {
            try {
                out.write(request);
                out.flush();
                return readReply();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** Whether the server closed the connection (read returns end of stream). */
        boolean isClosedByServer() {
            try {
                return in.read() < 0;
            } catch (IOException e) {
                return true;
            }
        }

        private Reply readReply() throws IOException {
            String statusLine = line();
            String[] parts = statusLine.split(" ", 3);
            Map<String, String> headers = new java.util.LinkedHashMap<>();
            for (String h = line(); !h.isEmpty(); h = line()) {
                int colon = h.indexOf(':');
                headers.put(h.substring(0, colon).toLowerCase(Locale.ROOT),
                        h.substring(colon + 1).trim());
            }
            int length = Integer.parseInt(headers.get("content-length"));
            byte[] body = in.readNBytes(length);
            if (body.length != length) {
                throw new EOFException("short body");
            }
            return new Reply(Integer.parseInt(parts[1]), headers,
                    new String(body, StandardCharsets.UTF_8));
        }

        private String line() throws IOException {
            ByteArrayOutputStream line = new ByteArrayOutputStream();
            for (int b = in.read(); b != '\n'; b = in.read()) {
                if (b < 0) {
                    throw new EOFException("connection closed");
                }
                if (b != '\r') {
                    line.write(b);
                }
            }
            return line.toString(StandardCharsets.ISO_8859_1);
        }

        @Override
        public void close() {
            try {
                channel.close();
            } catch (IOException ignored) {
                // Closing a test connection cannot fail in a way that matters.
            }
        }

        private static byte[] concat(byte[] a, byte[] b) {
            byte[] all = new byte[a.length + b.length];
            System.arraycopy(a, 0, all, 0, a.length);
            System.arraycopy(b, 0, all, a.length, b.length);
            return all;
        }
    }
}
