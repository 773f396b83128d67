import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import javax.tools.ToolProvider;

/**
 * Training run for the CDS archive (see build-cds.sh): starts the proxy with the command of
 * runtime.json plus -XX:DumpLoadedClassList, drives every request path once, and stops it, so
 * the class list names each JDK class a proxy loads from exec to its first activations.
 *
 * <p>Usage: java -cp target/icebox-java-proxy.jar cds/Train.java RUNTIME_DIR CLASSLIST_OUT
 */
public class Train {
    private static final String ACTION = String.join("\n",
            "import com.google.gson.JsonObject;",
            "public class TrainingAction {",
            "  public static JsonObject main(JsonObject args) {",
            "    if (args.has(\"fail\")) throw new IllegalStateException(\"training failure\");",
            "    if (args.has(\"null\")) return null;",
            "    System.out.println(\"training log line\");",
            "    JsonObject result = new JsonObject();",
            "    result.addProperty(\"greeting\", \"Hello \" + args.get(\"name\").getAsString());",
            "    result.addProperty(\"activation\", System.getenv(\"__OW_ACTIVATION_ID\"));",
            "    return result;",
            "  }",
            "}");

    public static void main(String[] args) throws Exception {
        Path runtimeDir = Path.of(args[0]).toAbsolutePath();
        Path classList = Path.of(args[1]).toAbsolutePath();
        Path work = Files.createTempDirectory("icebox-cds-train");
        Process proxy = null;
        boolean trained = false;
        try {
            String jar = Base64.getEncoder().encodeToString(actionJar(runtimeDir, work));
            Path socket = work.resolve("proxy.sock");
            List<String> command = proxyCommand(runtimeDir, classList, work);
            ProcessBuilder pb = new ProcessBuilder(command)
                    .directory(work.toFile())
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(work.resolve("proxy.err").toFile());
            pb.environment().put("ICEBOX_PROXY_SOCKET", socket.toString());
            pb.environment().put("ICEBOX_CONCURRENCY", "1");
            proxy = pb.start();
            awaitSocket(proxy, socket);

            expect(socket, "GET", "/icebox/stats", null, 200);
            expect(socket, "POST", "/run", "{\"value\":{}}", 403);
            expect(socket, "POST", "/init", "{\"value\":", 400);
            expect(socket, "POST", "/init", "{\"value\":{\"main\":\"Missing\",\"binary\":true,"
                    + "\"code\":\"" + jar + "\"}}", 502);
            expect(socket, "POST", "/init", "{\"value\":{\"name\":\"training\","
                    + "\"main\":\"TrainingAction#main\",\"binary\":true,\"code\":\"" + jar
                    + "\",\"env\":{\"TRAINING\":\"1\"}}}", 200);
            // As on a restored instance: the restore comes before the first /run, with the
            // variables iceboxd sends (so parsing and applying them is in the archive too).
            expect(socket, "POST", "/icebox/restored", "{\"instance\":\"training\",\"seed\":\""
                    + "0".repeat(64) + "\",\"env\":{\"__OW_API_HOST\":\"\"}}", 200);
            String run = "{\"value\":{\"name\":\"cds\",\"n\":1.5,\"list\":[1,true,null]},"
                    + "\"namespace\":\"ns\",\"action_name\":\"training\",\"activation_id\":\"a1\","
                    + "\"transaction_id\":\"t1\",\"api_key\":\"k\",\"deadline\":\"9999999999999\","
                    + "\"action_version\":\"0.0.1\"}";
            for (int i = 0; i < 3; i++) {
                expect(socket, "POST", "/run", run, 200);
            }
            expect(socket, "POST", "/run", "{\"value\":{\"fail\":true}}", 502);
            expect(socket, "POST", "/run", "{\"value\":{\"null\":true}}", 502);
            expect(socket, "GET", "/icebox/stats?gc=1", null, 200);
            expect(socket, "POST", "/icebox/reclaim", "", 200);
            expect(socket, "POST", "/icebox/reclaim", "{\"variant\":\"gc\"}", 200);
            expect(socket, "GET", "/icebox/stats", null, 200);
            expect(socket, "POST", "/run", run, 200);
            expect(socket, "GET", "/missing", null, 404);

            proxy.destroy();
            if (!proxy.waitFor(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("proxy did not stop after SIGTERM");
            }
            trained = true;
        } finally {
            if (proxy != null && proxy.isAlive()) {
                proxy.destroyForcibly().waitFor();
            }
            Path err = work.resolve("proxy.err");
            if (!trained && Files.exists(err)) {
                System.err.println("proxy stderr:\n" + Files.readString(err));
            }
            deleteTree(work);
        }
    }

    /**
     * runtime.json's command, with the archive it is about to build replaced by the class list,
     * and the action jar kept in the training's own directory rather than the shared /tmp.
     */
    private static List<String> proxyCommand(Path runtimeDir, Path classList, Path work)
            throws IOException {
        JsonObject spec = JsonParser.parseString(
                Files.readString(runtimeDir.resolve("runtime.json"))).getAsJsonObject();
        List<String> command = new ArrayList<>();
        for (JsonElement arg : spec.getAsJsonArray("command")) {
            String a = arg.getAsString().replace("{runtime_dir}", runtimeDir.toString());
            if (a.startsWith("-XX:SharedArchiveFile=")) {
                continue;
            }
            if (a.equals("-jar")) {
                command.add("-XX:DumpLoadedClassList=" + classList);
                command.add("-Djava.io.tmpdir=" + work);
            }
            command.add(a);
        }
        return command;
    }

    private static byte[] actionJar(Path runtimeDir, Path work) throws IOException {
        Path src = work.resolve("TrainingAction.java");
        Files.writeString(src, ACTION);
        Path classes = Files.createDirectories(work.resolve("classes"));
        int rc = ToolProvider.getSystemJavaCompiler().run(null, null, null, "-d",
                classes.toString(), "-cp",
                runtimeDir.resolve("target/icebox-java-proxy.jar").toString(), src.toString());
        if (rc != 0) {
            throw new IllegalStateException("compiling the training action failed");
        }
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (JarOutputStream jar = new JarOutputStream(bytes)) {
            jar.putNextEntry(new JarEntry("TrainingAction.class"));
            jar.write(Files.readAllBytes(classes.resolve("TrainingAction.class")));
            jar.closeEntry();
        }
        return bytes.toByteArray();
    }

    private static void awaitSocket(Process proxy, Path socket) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (!proxy.isAlive()) {
                throw new IllegalStateException("proxy exited with " + proxy.exitValue());
            }
            try {
                SocketChannel.open(UnixDomainSocketAddress.of(socket)).close();
                return;
            } catch (IOException notYet) {
                Thread.sleep(10);
            }
        }
        throw new IllegalStateException("proxy did not accept connections within 30 s");
    }

    private static void expect(Path socket, String method, String path, String body, int status)
            throws IOException {
        byte[] payload = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            ch.connect(UnixDomainSocketAddress.of(socket));
            String head = method + " " + path + " HTTP/1.1\r\nContent-Length: " + payload.length
                    + "\r\nConnection: close\r\n\r\n";
            ByteArrayOutputStream request = new ByteArrayOutputStream();
            request.write(head.getBytes(StandardCharsets.US_ASCII));
            request.write(payload);
            ch.write(ByteBuffer.wrap(request.toByteArray()));
            ByteArrayOutputStream response = new ByteArrayOutputStream();
            ByteBuffer buf = ByteBuffer.allocate(8192);
            while (ch.read(buf) >= 0) {
                response.write(buf.array(), 0, buf.position());
                buf.clear();
            }
            String text = response.toString(StandardCharsets.UTF_8);
            if (!text.startsWith("HTTP/1.1 " + status + " ")) {
                throw new IllegalStateException(method + " " + path + ": expected " + status
                        + ", got: " + text);
            }
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (var paths = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) paths.sorted((a, b) -> b.compareTo(a))::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }
}
