package icebox.proxy;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.util.Map;

/** Serves the requests of one keep-alive connection, one at a time, on its own thread. */
final class Connection implements Runnable {
    private final SocketChannel channel;
    private final Proxy proxy;

    Connection(SocketChannel channel, Proxy proxy) {
        this.channel = channel;
        this.proxy = proxy;
    }

    @Override
    public void run() {
        try (SocketChannel ch = channel) {
            InputStream in = new BufferedInputStream(Channels.newInputStream(ch), 8192);
            OutputStream out = Channels.newOutputStream(ch);
            serve(in, out, proxy);
        } catch (IOException peerGone) {
            // iceboxd closed or reset the connection; nothing is left to answer.
        }
    }

    /** Request/response loop until the peer closes or a request forbids reuse. */
    static void serve(InputStream in, OutputStream out, Proxy proxy) throws IOException {
        for (;;) {
            HttpRequest request;
            try {
                request = Http1.readRequest(in, out);
            } catch (HttpException e) {
                Http1.writeResponse(out, e.status, Json.error(e.getMessage()), true, Map.of());
                return;
            }
            if (request == null) {
                return;
            }
            Response response;
            try {
                response = proxy.handle(request);
            } catch (RuntimeException | Error e) {
                response = Response.error(500, "Internal error: " + Throwables.describe(e));
            }
            Http1.writeResponse(out, response.status, response.body, !request.keepAlive(),
                    response.headers);
            if (!request.keepAlive()) {
                return;
            }
        }
    }
}
