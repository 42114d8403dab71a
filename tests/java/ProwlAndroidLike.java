// An Android-like Prowl mirror client on BouncyCastle's TLS (bctls), for mirror-host's tests.
//
// It talks to a host the way Prowl's Android app does, as
// /work/shared/spec/prowl-clients.md describes that app (written from that
// description, not from the app's code): a BouncyCastle PSKTlsClient with
// TLS 1.2 and TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256 only; the challenge
// as the first control message; integers parsed from the number's text; no
// command at all without `launch-profile`; exactly one scrollState per frame;
// history given up after 8 s; and it notes whether TLS ended with close_notify.
//
// Usage (every line it prints on stdout is one JSON object, "event" first):
//   pair HOST PORT CODE NAME
//   session HOST PORT HOST_ID DEVICE_ID KEY_BASE64 [options]
//     --pane-title TEXT     subscribe to the first pane whose title contains TEXT
//     --prompt TEXT         run the composer's Send route with TEXT
//     --history SECONDS     ask for history; if unavailable, ask again SECONDS later
//     --hold                afterwards, keep reading until the host closes
//     --silent              after the first frame send nothing at all (the host's idle close)
//     --bad-proof           log in with a wrong proof (the host closes)
//     --violate             after login, send `history` without a lease (the host closes)
// Exit status 0 when the session went as the options asked, 1 on the first
// rule the host broke (an "error" event says which), 2 on bad usage.

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.bouncycastle.tls.AlertDescription;
import org.bouncycastle.tls.BasicTlsPSKIdentity;
import org.bouncycastle.tls.CipherSuite;
import org.bouncycastle.tls.PSKTlsClient;
import org.bouncycastle.tls.ProtocolVersion;
import org.bouncycastle.tls.TlsClientProtocol;
import org.bouncycastle.tls.TlsNoCloseNotifyException;
import org.bouncycastle.tls.crypto.impl.bc.BcTlsCrypto;

public final class ProwlAndroidLike {
    static final int MAX_PACKET = 8 * 1024 * 1024;
    static final int MAX_TEXT_BYTES = 1024 * 1024;
    static final long BEFORE_LOGIN_MS = 5_000, AFTER_LOGIN_MS = 8_000;
    static final long HISTORY_MS = 8_000, COMMAND_MS = 30_000, PING_MS = 2_000;

    /** A rule the host broke: the session ends here, as the app would end it. */
    static final class Broken extends Exception {
        Broken(String message) { super(message); }
    }

    // ------------------------------------------------------------------ output

    static synchronized void emit(Object... pairs) {
        Map<String, Object> object = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) object.put((String) pairs[i], pairs[i + 1]);
        System.out.println(Json.write(object));
        System.out.flush();
    }

    // ------------------------------------------------------------------ TLS

    static final class Tls {
        final Socket socket;
        final TlsClientProtocol protocol;
        volatile boolean closeNotifyReceived;
        int suite = -1;
        ProtocolVersion version;
        /** The server's PSK identity hint: "" when it sent none (what Prowl's hosts send). */
        String identityHint;
        boolean secureRenegotiation, extendedMasterSecret;

        Tls(String host, int port, String identity, byte[] psk) throws IOException {
            socket = new Socket();
            socket.connect(new InetSocketAddress(host, port), 5_000);
            socket.setKeepAlive(true);
            protocol = new TlsClientProtocol(socket.getInputStream(), socket.getOutputStream());
            Tls self = this;
            BasicTlsPSKIdentity pskIdentity = new BasicTlsPSKIdentity(identity, psk) {
                @Override public void skipIdentityHint() {
                    super.skipIdentityHint();
                    self.identityHint = "";
                }
                @Override public void notifyIdentityHint(byte[] hint) {
                    super.notifyIdentityHint(hint);
                    self.identityHint = new String(hint, StandardCharsets.UTF_8);
                }
            };
            PSKTlsClient client = new PSKTlsClient(new BcTlsCrypto(new SecureRandom()), pskIdentity) {
                @Override protected ProtocolVersion[] getSupportedVersions() {
                    return ProtocolVersion.TLSv12.only();
                }
                @Override protected int[] getSupportedCipherSuites() {
                    return new int[] {CipherSuite.TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256};
                }
                @Override public void notifySelectedCipherSuite(int selected) {
                    super.notifySelectedCipherSuite(selected);
                    self.suite = selected;
                }
                @Override public void notifyServerVersion(ProtocolVersion server) throws IOException {
                    super.notifyServerVersion(server);
                    self.version = server;
                }
                @Override public void notifyAlertReceived(short level, short description) {
                    super.notifyAlertReceived(level, description);
                    if (description == AlertDescription.close_notify) self.closeNotifyReceived = true;
                }
                @Override public void notifySecureRenegotiation(boolean secure) throws IOException {
                    self.secureRenegotiation = secure;
                    super.notifySecureRenegotiation(secure);  // aborts without renegotiation_info
                }
                @Override public void notifyHandshakeComplete() throws IOException {
                    super.notifyHandshakeComplete();
                    self.extendedMasterSecret =
                            context.getSecurityParametersConnection().isExtendedMasterSecret();
                }
            };
            protocol.connect(client);  // the blocking handshake
        }

        void report() {
            emit("event", "tls", "suite", suiteHex(), "version", String.valueOf(version),
                    "identityHint", identityHint, "secureRenegotiation", secureRenegotiation,
                    "extendedMasterSecret", extendedMasterSecret);
        }

        String suiteHex() { return String.format("0x%04X", suite); }

        void close() {
            try { protocol.close(); } catch (IOException ignored) { }
            try { socket.close(); } catch (IOException ignored) { }
        }
    }

    // ------------------------------------------------------------------ packets

    /** One packet: kind 0 (control JSON), 1 (VT frame) or 2 (text frame). */
    static final class Packet {
        final int kind;
        final byte[] body;
        Packet(int kind, byte[] body) { this.kind = kind; this.body = body; }
    }

    /** The end of the stream, and how it ended. */
    static final class Closed {
        final boolean closeNotify;
        final String reason;
        Closed(boolean closeNotify, String reason) { this.closeNotify = closeNotify; this.reason = reason; }
    }

    static final class Connection {
        final Tls tls;
        final OutputStream out;
        final LinkedBlockingQueue<Object> inbox = new LinkedBlockingQueue<>();
        volatile boolean silent;
        volatile boolean closing;
        Closed closed;
        Thread reader, pinger;

        Connection(Tls tls) {
            this.tls = tls;
            this.out = tls.protocol.getOutputStream();
        }

        void start() {
            reader = new Thread(this::readLoop, "reader");
            reader.setDaemon(true);
            reader.start();
            pinger = new Thread(this::pingLoop, "pinger");
            pinger.setDaemon(true);
            pinger.start();
        }

        void readLoop() {
            InputStream raw = tls.protocol.getInputStream();
            DataInputStream in = new DataInputStream(raw);
            try {
                while (true) {
                    int first = in.read();
                    if (first < 0) {
                        inbox.add(new Closed(tls.closeNotifyReceived, "end of stream"));
                        return;
                    }
                    byte[] rest = new byte[3];
                    in.readFully(rest);
                    long length = ((long) first << 24) | ((rest[0] & 0xFFL) << 16)
                            | ((rest[1] & 0xFFL) << 8) | (rest[2] & 0xFFL);
                    if (length < 1 || length > MAX_PACKET) {
                        inbox.add(new Broken("packet length " + length + " outside 1 ... 8 MiB"));
                        return;
                    }
                    int kind = in.readUnsignedByte();
                    byte[] body = new byte[(int) length - 1];
                    in.readFully(body);
                    inbox.add(new Packet(kind, body));
                }
            } catch (TlsNoCloseNotifyException e) {
                inbox.add(new Closed(false, "No close_notify"));
            } catch (EOFException e) {
                inbox.add(new Closed(tls.closeNotifyReceived, "end of stream inside a packet"));
            } catch (IOException e) {
                inbox.add(new Closed(tls.closeNotifyReceived, String.valueOf(e)));
            }
        }

        void pingLoop() {
            try {
                while (!closing) {
                    Thread.sleep(PING_MS);
                    if (!silent && !closing) send(Json.object("ping", Json.object()));
                }
            } catch (InterruptedException | IOException ignored) { }
        }

        /** Set once a write failed: the host is closing, and the reader will say how. */
        volatile boolean sendFailed;

        synchronized void send(Map<String, Object> message) throws IOException {
            if (silent || sendFailed) return;
            byte[] body = Json.write(message).getBytes(StandardCharsets.UTF_8);
            ByteBuffer packet = ByteBuffer.allocate(5 + body.length);
            packet.putInt(body.length + 1).put((byte) 0).put(body);
            try {
                out.write(packet.array());
                out.flush();
            } catch (IOException e) {
                sendFailed = true;  // what the host sent before closing is still read
            }
        }

        /** The next packet within the client's read timeout; pings answered, pongs skipped. */
        Object next(long timeoutMs) throws Broken, InterruptedException, IOException {
            return next(timeoutMs, Long.MAX_VALUE);
        }

        /**
         * The same, or null once {@code deadline} (a currentTimeMillis) passes. The read
         * timeout counts from the last packet of any kind, as the app's socket timeout does.
         */
        Object next(long timeoutMs, long deadline) throws Broken, InterruptedException, IOException {
            long lastPacket = System.currentTimeMillis();
            while (true) {
                long now = System.currentTimeMillis();
                if (now >= deadline) return null;
                long wait = Math.min(lastPacket + timeoutMs, deadline) - now;
                Object item = inbox.poll(Math.max(wait, 1), TimeUnit.MILLISECONDS);
                if (item == null) {
                    if (System.currentTimeMillis() >= deadline) return null;
                    if (System.currentTimeMillis() - lastPacket >= timeoutMs) {
                        throw new Broken("nothing from the host within " + timeoutMs + " ms");
                    }
                    continue;
                }
                lastPacket = System.currentTimeMillis();
                if (item instanceof Broken) throw (Broken) item;
                if (item instanceof Closed) { closed = (Closed) item; return item; }
                Packet packet = (Packet) item;
                if (packet.kind == 0) {
                    Map<String, Object> message = control(packet);
                    if (message.containsKey("ping")) { send(Json.object("pong", Json.object())); continue; }
                    if (message.containsKey("pong")) continue;
                    return message;
                }
                return packet;
            }
        }

        void stop() {
            closing = true;
            tls.close();
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> control(Packet packet) throws Broken {
        Object parsed;
        try {
            parsed = Json.parse(utf8(packet.body));
        } catch (IllegalArgumentException e) {
            throw new Broken("undecodable control message: " + e.getMessage());
        }
        if (!(parsed instanceof Map) || ((Map<String, Object>) parsed).size() != 1) {
            throw new Broken("a control message is not an object with one case");
        }
        return (Map<String, Object>) parsed;
    }

    static String utf8(byte[] bytes) throws Broken {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            throw new Broken("text that is not UTF-8");
        }
    }

    // ------------------------------------------------------------------ typed reads

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Object value, String what) throws Broken {
        if (!(value instanceof Map)) throw new Broken(what + " is not an object");
        return (Map<String, Object>) value;
    }

    static Map<String, Object> payload(Map<String, Object> message, String kase) throws Broken {
        return obj(obj(message.get(kase), kase).get("_0"), kase + "._0");
    }

    static String str(Map<String, Object> map, String key) throws Broken {
        Object value = map.get(key);
        if (!(value instanceof String)) throw new Broken(key + " is not a string");
        return (String) value;
    }

    static boolean bool(Map<String, Object> map, String key) throws Broken {
        Object value = map.get(key);
        if (!(value instanceof Boolean)) throw new Broken(key + " is not a boolean");
        return (Boolean) value;
    }

    /** Android parses an integer from the number's own text: "12.0" or "1e3" disconnects it. */
    static long integer(Map<String, Object> map, String key) throws Broken {
        Object value = map.get(key);
        if (!(value instanceof Json.Num)) throw new Broken(key + " is not a number");
        String text = ((Json.Num) value).text;
        if (!text.matches("-?[0-9]+")) throw new Broken(key + " is not written as an integer: " + text);
        return Long.parseLong(text);
    }

    static UUID uuid(Map<String, Object> map, String key) throws Broken {
        try {
            return UUID.fromString(str(map, key));
        } catch (IllegalArgumentException e) {
            throw new Broken(key + " is not a UUID");
        }
    }

    static String kind(Map<String, Object> message) {
        return message.keySet().iterator().next();
    }

    static String upper(UUID id) { return id.toString().toUpperCase(); }

    // ------------------------------------------------------------------ proofs

    static byte[] proof(byte[] key, String purpose, UUID host, String identity, byte[] nonce) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        mac.update((purpose + ":" + upper(host) + ":" + identity + ":").getBytes(StandardCharsets.UTF_8));
        return mac.doFinal(nonce);
    }

    // ------------------------------------------------------------------ the session

    static Map<String, Object> challenge(Connection connection) throws Exception {
        Object first = connection.next(BEFORE_LOGIN_MS);
        if (!(first instanceof Map)) throw new Broken("the first packet is not a control message");
        Map<String, Object> message = (Map<String, Object>) obj(first, "message");
        if (!message.containsKey("challenge")) throw new Broken("the first control message is " + kind(message));
        Map<String, Object> challenge = payload(message, "challenge");
        byte[] nonce = Base64.getDecoder().decode(str(challenge, "nonce"));
        if (nonce.length != 32) throw new Broken("the nonce is " + nonce.length + " bytes");
        uuid(challenge, "hostID");
        return challenge;
    }

    static int pair(String host, int port, String code, String name) throws Exception {
        Tls tls = new Tls(host, port, "pair", code.getBytes(StandardCharsets.UTF_8));
        tls.report();
        Connection connection = new Connection(tls);
        connection.start();
        try {
            Map<String, Object> challenge = challenge(connection);
            UUID hostId = uuid(challenge, "hostID");
            byte[] nonce = Base64.getDecoder().decode(str(challenge, "nonce"));
            byte[] proof = proof(code.getBytes(StandardCharsets.UTF_8), "pair", hostId, name, nonce);
            connection.send(Json.object("pair", Json.object("_0",
                    Json.object("name", name, "proof", Base64.getEncoder().encodeToString(proof)))));
            Object answer = connection.next(BEFORE_LOGIN_MS);
            if (!(answer instanceof Map) || !((Map<?, ?>) answer).containsKey("paired")) {
                throw new Broken("expected paired, got " + describe(answer));
            }
            Map<String, Object> paired = payload(obj(answer, "paired"), "paired");
            if (!uuid(paired, "hostID").equals(hostId)) throw new Broken("paired.hostID differs from the challenge's");
            byte[] key = Base64.getDecoder().decode(str(paired, "key"));
            if (key.length != 32) throw new Broken("paired.key is " + key.length + " bytes");
            emit("event", "paired", "hostID", upper(hostId), "deviceID", upper(uuid(paired, "deviceID")),
                    "key", Base64.getEncoder().encodeToString(key));
            return 0;
        } finally {
            connection.stop();
        }
    }

    static String describe(Object item) {
        if (item instanceof Closed) return "the end of the connection (" + ((Closed) item).reason + ")";
        if (item instanceof Packet) return "a kind " + ((Packet) item).kind + " frame";
        if (item instanceof Map) return kind(obj0(item));
        return String.valueOf(item);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj0(Object item) { return (Map<String, Object>) item; }

    static final class Options {
        String paneTitle, prompt;
        Double historyRetry;
        boolean hold, silent, badProof, violate;
    }

    static final class Session {
        final Connection connection;
        final Options options;
        UUID pane, lease;
        List<String> capabilities = new ArrayList<>();
        boolean scrollState;
        /** The sequence of a scrollState waiting for its frame, if one is. */
        Long stagedScrollState;
        long lastFrame;
        int frames;

        Session(Connection connection, Options options) {
            this.connection = connection;
            this.options = options;
        }

        /** The next control message within {@code timeoutMs}, else null; frames are handled. */
        Map<String, Object> nextControl(long timeoutMs) throws Exception {
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (true) {
                Object item = step(deadline);
                if (item == null) return null;
                if (item instanceof Map) return obj0(item);
            }
        }

        static final Object FRAME = new Object();

        /** One packet by {@code deadline}: a control message, FRAME (checked, acknowledged), or null. */
        Object step(long deadline) throws Exception {
            while (true) {
                Object item = connection.next(AFTER_LOGIN_MS, deadline);
                if (item == null) return null;
                if (item instanceof Closed) throw new HostClosed((Closed) item);
                if (item instanceof Packet) { frame((Packet) item); return FRAME; }
                Map<String, Object> message = obj0(item);
                if (message.containsKey("scrollState")) { scrollStateMessage(message); continue; }
                if (message.containsKey("panes")) {
                    if (!listPending) throw new Broken("panes sent without a list");
                    listPending = false;
                }
                if (message.containsKey("viewport")) throw new Broken("viewport sent to a phone");
                if (message.containsKey("historyPage") && !historyPending) {
                    throw new Broken("historyPage nobody asked for (or after the 8 s timeout)");
                }
                if (message.containsKey("failure")) {
                    String error = str(payload(message, "failure"), "error");
                    if (error.startsWith("HISTORY_UNAVAILABLE") && !historyPending) {
                        throw new Broken("HISTORY_UNAVAILABLE with no history load pending");
                    }
                    if (!error.startsWith("HISTORY_UNAVAILABLE") && !error.startsWith("SCROLL_")) {
                        throw new Broken("failure: " + error);  // Android reconnects after it
                    }
                }
                if (message.containsKey("ended")) {
                    emit("event", "ended", "reason", str(payload(message, "ended"), "reason"));
                    throw new Ended();
                }
                return message;
            }
        }

        boolean historyPending, listPending;

        void scrollStateMessage(Map<String, Object> message) throws Broken {
            if (!scrollState) throw new Broken("scrollState without the opt-in");
            Map<String, Object> state = payload(message, "scrollState");
            if (stagedScrollState != null) throw new Broken("two scrollStates staged before a frame");
            if (!uuid(state, "subscriptionID").equals(lease)) throw new Broken("scrollState for another lease");
            stagedScrollState = integer(state, "sequence");
        }

        void frame(Packet packet) throws Exception {
            if (packet.kind != 2) throw new Broken("a kind " + packet.kind + " frame on a text-v1 lease");
            ByteBuffer body = ByteBuffer.wrap(packet.body);
            if (packet.body.length < 33) throw new Broken("a short text frame header");
            byte[] sub = new byte[16];
            body.get(sub);
            ByteBuffer id = ByteBuffer.wrap(sub);
            UUID subscription = new UUID(id.getLong(), id.getLong());
            long sequence = body.getLong();
            long columns = body.getInt() & 0xFFFFFFFFL, rows = body.getInt() & 0xFFFFFFFFL;
            int truncated = body.get();
            if (!subscription.equals(lease)) throw new Broken("a frame for another lease");
            if (sequence <= lastFrame) throw new Broken("frame sequence " + sequence + " after " + lastFrame);
            if (columns > 1000 || rows > 1000) throw new Broken("a text grid of " + columns + "x" + rows);
            if (truncated != 0 && truncated != 1) throw new Broken("truncated flag " + truncated);
            int textBytes = packet.body.length - 33;
            if (textBytes > MAX_TEXT_BYTES) throw new Broken("a text frame of " + textBytes + " bytes");
            String text = utf8(Arrays.copyOfRange(packet.body, 33, packet.body.length));
            if (scrollState) {
                if (stagedScrollState == null) throw new Broken("a frame without its scrollState");
                if (stagedScrollState != sequence) throw new Broken("scrollState " + stagedScrollState + " before frame " + sequence);
                stagedScrollState = null;
            }
            lastFrame = sequence;
            frames++;
            if (frames == 1) emit("event", "frame", "sequence", sequence, "columns", columns, "rows", rows, "text", text);
            connection.send(Json.object("acknowledge", Json.object("_0",
                    Json.object("sequence", new Json.Num(Long.toString(sequence)), "subscriptionID", upper(lease)))));
        }

        Map<String, Object> command(Map<String, Object> command) throws Exception {
            UUID request = UUID.randomUUID();
            Map<String, Object> body = Json.object("commandRequest", Json.object("requestID", upper(request),
                    "request", Json.object("output", "json", "command", command)));
            if (lease != null) body = Json.object("subscriptionID", upper(lease), "commandRequest", body.get("commandRequest"));
            connection.send(Json.object("command", Json.object("_0", body)));
            long deadline = System.currentTimeMillis() + COMMAND_MS;
            while (true) {
                Map<String, Object> message = nextControl(deadline - System.currentTimeMillis());
                if (message == null) throw new Broken("no commandResult within 30 s");
                if (!message.containsKey("commandResult")) throw new Broken("expected commandResult, got " + kind(message));
                Map<String, Object> response = obj(payload(message, "commandResult").get("commandResponse"), "commandResponse");
                if (!uuid(response, "requestID").equals(request)) continue;  // unknown id: ignored
                Map<String, Object> result = obj(response.get("response"), "commandResponse.response");
                bool(result, "ok");
                if (!(Boolean) result.get("ok")) {
                    Map<String, Object> error = obj(result.get("error"), "error");
                    str(error, "code");
                    str(error, "message");  // iOS needs both
                }
                return result;
            }
        }

        /** The composer's Send, routed as the phone routes it (prowl-clients.md). */
        void composer(String prompt) throws Exception {
            if (!capabilities.contains("launch-profile")) {
                emit("event", "composer", "route", "none", "reason", "no launch-profile: the app sends no command");
                return;
            }
            Map<String, Object> listed = command(Json.object("list", Json.object("_0", Json.object())));
            if (!bool(listed, "ok")) throw new Broken("list failed: " + listed);
            List<?> items = (List<?>) obj(listed.get("data"), "data").get("items");
            if (items == null) throw new Broken("list has no data.items");
            Map<String, Object> mine = null;
            for (Object entry : items) {
                Map<String, Object> item = obj(entry, "item");
                obj(item.get("worktree"), "worktree");
                obj(item.get("task"), "task");
                Map<String, Object> paneRecord = obj(item.get("pane"), "pane");
                if (uuid(paneRecord, "id").equals(pane)) { mine = item; break; }
            }
            if (mine == null) {
                emit("event", "composer", "route", "none", "reason", "the subscribed pane is not in list");
                return;
            }
            Map<String, Object> paneRecord = obj(mine.get("pane"), "pane");
            Object agent = paneRecord.get("agent");
            if (agent instanceof String) {
                if (!capabilities.contains("agent-input")) {
                    emit("event", "composer", "route", "none", "reason", "no agent-input");
                    return;
                }
                Map<String, Object> result = command(Json.object("agentsInput", Json.object("_0",
                        Json.object("pane", upper(pane), "prompt", prompt))));
                emit("event", "composer", "route", "agentsInput", "agent", agent, "outcome", outcome(result, prompt, "agents.input"), "result", result);
                return;
            }
            String status = obj(mine.get("task"), "task").get("status") instanceof String
                    ? (String) obj(mine.get("task"), "task").get("status") : null;
            if (!"idle".equals(status)) {
                emit("event", "composer", "route", "none", "reason", "Shell task is running or its state is unknown");
                return;
            }
            if (!capabilities.contains("shell-send")) {
                emit("event", "composer", "route", "none", "reason", "Host cannot verify an empty command line");
                return;
            }
            Map<String, Object> result = command(Json.object("send", Json.object("_0", Json.object(
                    "selector", Json.object("pane", Json.object("_0", upper(pane))), "text", prompt,
                    "trailing_enter", true, "source", "argv", "wait", false, "capture_output", false))));
            emit("event", "composer", "route", "send", "outcome", outcome(result, prompt, "send"), "result", result);
        }

        static String outcome(Map<String, Object> result, String prompt, String command) throws Broken {
            if (Boolean.TRUE.equals(result.get("ok"))) {
                if (!command.equals(result.get("command"))) return "rejected";
                Map<String, Object> input = obj(obj(result.get("data"), "data").get("input"), "data.input");
                long bytes = integer(input, "bytes");
                boolean enter = bool(input, "trailing_enter_sent");
                return bytes == prompt.getBytes(StandardCharsets.UTF_8).length && enter ? "sent" : "rejected";
            }
            String code = str(obj(result.get("error"), "error"), "code");
            return Arrays.asList("REMOTE_COMMAND_UNCONFIRMED", "DISPATCH_FAILED", "SEND_FAILED").contains(code)
                    ? "unknown" : "rejected";
        }

        /** One history load: a page, HISTORY_UNAVAILABLE, or given up after 8 s. */
        String history() throws Exception {
            connection.send(Json.object("history", Json.object("_0", Json.object("subscriptionID", upper(lease)))));
            historyPending = true;
            long started = System.currentTimeMillis();
            try {
                while (true) {
                    Map<String, Object> message = nextControl(HISTORY_MS - (System.currentTimeMillis() - started));
                    if (message == null) return "timed out";
                    if (message.containsKey("historyPage")) {
                        Map<String, Object> page = payload(message, "historyPage");
                        long offset = integer(page, "offset"), total = integer(page, "total");
                        List<?> lines = (List<?>) page.get("lines");
                        if (lines == null || lines.size() > 200) throw new Broken("a page of " + (lines == null ? "no" : lines.size()) + " lines");
                        if (offset + lines.size() != total) throw new Broken("the first page does not end at the total");
                        emit("event", "history", "outcome", "page", "total", total, "lines", lines);
                        return "page";
                    }
                    if (message.containsKey("failure")) {
                        emit("event", "history", "outcome", "unavailable");
                        return "unavailable";
                    }
                    throw new Broken("expected historyPage, got " + kind(message));
                }
            } finally {
                historyPending = false;
            }
        }
    }

    /** The host ended the session (`ended`); nothing more to do. */
    static final class Ended extends Exception { }

    /** The host closed the connection without `ended`. */
    static final class HostClosed extends Exception {
        final Closed closed;
        HostClosed(Closed closed) { this.closed = closed; }
    }

    static int session(String host, int port, UUID hostId, UUID deviceId, byte[] key, Options options) throws Exception {
        Tls tls = new Tls(host, port, upper(deviceId), key);
        tls.report();
        Connection connection = new Connection(tls);
        connection.start();
        Session session = new Session(connection, options);
        try {
            Map<String, Object> challenge = challenge(connection);
            if (!uuid(challenge, "hostID").equals(hostId)) throw new Broken("the challenge names another host");
            byte[] nonce = Base64.getDecoder().decode(str(challenge, "nonce"));
            byte[] proof = options.badProof ? new byte[32] : proof(key, "device", hostId, upper(deviceId), nonce);
            connection.send(Json.object("authenticate", Json.object("_0", Json.object(
                    "deviceID", upper(deviceId), "proof", Base64.getEncoder().encodeToString(proof)))));
            if (options.badProof) return hold(connection);
            Object answer = connection.next(BEFORE_LOGIN_MS);
            if (!(answer instanceof Map) || !obj0(answer).containsKey("authenticated")) {
                throw new Broken("expected authenticated, got " + describe(answer));
            }
            Object hostRun = obj(obj0(answer).get("authenticated"), "authenticated").get("_0");
            if (!upper(hostId).equals(String.valueOf(hostRun).toUpperCase())) throw new Broken("authenticated names another host");
            emit("event", "authenticated");
            if (options.violate) {
                connection.send(Json.object("history", Json.object("_0", Json.object("subscriptionID", upper(UUID.randomUUID())))));
                return hold(connection);
            }
            connection.send(Json.object("list", Json.object()));
            session.listPending = true;
            Map<String, Object> listing = session.nextControl(AFTER_LOGIN_MS);
            if (listing == null || !listing.containsKey("panes")) throw new Broken("expected panes");
            return subscribed(session, listing);
        } catch (Ended ended) {
            return options.hold ? hold(connection) : 0;
        } catch (HostClosed end) {
            if (options.hold) {  // what the test waits for: how the host closed
                emit("event", "closed", "closeNotify", end.closed.closeNotify, "reason", end.closed.reason);
                return 0;
            }
            emit("event", "error", "message", "the host closed the connection (" + end.closed.reason
                    + ", close_notify " + end.closed.closeNotify + ")");
            return 1;
        } catch (Broken broken) {
            emit("event", "error", "message", broken.getMessage());
            return 1;
        } finally {
            connection.stop();
        }
    }

    static int subscribed(Session session, Map<String, Object> listing) throws Exception {
        Options options = session.options;
        Connection connection = session.connection;
        Map<String, Object> panes = payload(listing, "panes");
        for (Object capability : (List<?>) panes.get("capabilities")) session.capabilities.add((String) capability);
        uuid(panes, "hostRunID");
        List<Map<String, Object>> entries = new ArrayList<>();
        for (Object entry : (List<?>) panes.get("panes")) {
            Map<String, Object> pane = obj(entry, "pane");
            uuid(pane, "id");
            str(pane, "title");
            str(pane, "directory");
            bool(pane, "busy");
            entries.add(pane);
        }
        List<Object> titles = new ArrayList<>();
        for (Map<String, Object> pane : entries) titles.add(pane.get("title"));
        emit("event", "panes", "capabilities", session.capabilities, "titles", titles);
        if (!session.capabilities.contains("text-v1")) throw new Broken("no text-v1: update Host");
        Map<String, Object> chosen = null;
        for (Map<String, Object> pane : entries) {
            if (options.paneTitle == null || str(pane, "title").contains(options.paneTitle)) { chosen = pane; break; }
        }
        if (chosen == null) throw new Broken("no pane to subscribe to");
        session.pane = uuid(chosen, "id");
        session.scrollState = session.capabilities.contains("scroll-state-v1");
        Map<String, Object> request = Json.object("paneID", upper(session.pane), "representation", "text-v1",
                "intent", bool(chosen, "busy") ? "takeover" : "ifFree");
        if (session.scrollState) request.put("includeScrollState", true);
        connection.send(Json.object("subscribe", Json.object("_0", request)));
        Map<String, Object> answer = session.nextControl(AFTER_LOGIN_MS);
        if (answer == null || !answer.containsKey("subscribed")) throw new Broken("expected subscribed");
        Map<String, Object> subscribed = payload(answer, "subscribed");
        if (!uuid(subscribed, "paneID").equals(session.pane)) throw new Broken("subscribed names another pane");
        session.lease = uuid(subscribed, "subscriptionID");
        uuid(subscribed, "hostRunID");
        emit("event", "subscribed");
        long firstBy = System.currentTimeMillis() + AFTER_LOGIN_MS;
        while (session.frames == 0) {  // iOS stays "subscribing" (no Send) until it comes
            Object item = session.step(firstBy);
            if (item == null) throw new Broken("no first frame within 8 s of subscribed");
            if (item instanceof Map) throw new Broken("expected the first frame, got " + kind(obj0(item)));
        }
        if (options.silent) {
            connection.silent = true;
            return hold(connection);
        }
        if (options.prompt != null) session.composer(options.prompt);
        if (options.historyRetry != null) {
            String first = session.history();
            if (!"page".equals(first)) {
                if ("timed out".equals(first)) throw new Broken("History timed out");
                long until = System.currentTimeMillis() + (long) (options.historyRetry * 1000);
                while (System.currentTimeMillis() < until) {
                    Map<String, Object> message = session.nextControl(until - System.currentTimeMillis());
                    if (message != null) throw new Broken("unexpected " + kind(message) + " while waiting to retry");
                }
                if (!"page".equals(session.history())) throw new Broken("the retry got no page");
            }
        }
        if (options.hold) {
            while (true) {  // until `ended` or a close
                Map<String, Object> message = session.nextControl(AFTER_LOGIN_MS);
                if (message != null) emit("event", "received", "kind", kind(message));
            }
        }
        return 0;
    }

    /** Read until the host closes; report whether TLS ended with close_notify. */
    static int hold(Connection connection) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            Object item = connection.inbox.poll(deadline - System.currentTimeMillis(), TimeUnit.MILLISECONDS);
            if (item == null) break;
            if (item instanceof Closed) {
                Closed closed = (Closed) item;
                emit("event", "closed", "closeNotify", closed.closeNotify, "reason", closed.reason);
                return 0;
            }
            if (item instanceof Packet && ((Packet) item).kind == 0) {
                Map<String, Object> message = control((Packet) item);
                if (message.containsKey("ping")) {
                    connection.send(Json.object("pong", Json.object()));
                } else if (!message.containsKey("pong")) {
                    emit("event", "received", "kind", kind(message));
                }
            }
        }
        emit("event", "error", "message", "the host did not close the connection");
        return 1;
    }

    public static void main(String[] args) throws Exception {
        try {
            if (args.length == 5 && args[0].equals("pair")) {
                System.exit(pair(args[1], Integer.parseInt(args[2]), args[3], args[4]));
            }
            if (args.length >= 6 && args[0].equals("session")) {
                Options options = new Options();
                for (int i = 6; i < args.length; i++) {
                    switch (args[i]) {
                        case "--pane-title": options.paneTitle = args[++i]; break;
                        case "--prompt": options.prompt = args[++i]; break;
                        case "--history": options.historyRetry = Double.parseDouble(args[++i]); break;
                        case "--hold": options.hold = true; break;
                        case "--silent": options.silent = true; break;
                        case "--bad-proof": options.badProof = true; break;
                        case "--violate": options.violate = true; break;
                        default: throw new IllegalArgumentException("unknown option " + args[i]);
                    }
                }
                System.exit(session(args[1], Integer.parseInt(args[2]), UUID.fromString(args[3]),
                        UUID.fromString(args[4]), Base64.getDecoder().decode(args[5]), options));
            }
        } catch (Broken broken) {
            emit("event", "error", "message", broken.getMessage());
            System.exit(1);
        } catch (IOException e) {
            emit("event", "error", "message", "I/O: " + e);
            System.exit(1);
        }
        System.err.println("usage: pair HOST PORT CODE NAME | session HOST PORT HOST_ID DEVICE_ID KEY [options]");
        System.exit(2);
    }
}

/** Just enough JSON: objects keep member order; numbers keep their text (see integer()). */
final class Json {
    static final class Num {
        final String text;
        Num(String text) { this.text = text; }
        @Override public String toString() { return text; }
    }

    static Map<String, Object> object(Object... pairs) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) map.put((String) pairs[i], pairs[i + 1]);
        return map;
    }

    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        write(value, out);
        return out.toString();
    }

    private static void write(Object value, StringBuilder out) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String) {
            out.append('"');
            for (char ch : ((String) value).toCharArray()) {
                switch (ch) {
                    case '"': out.append("\\\""); break;
                    case '\\': out.append("\\\\"); break;
                    case '\n': out.append("\\n"); break;
                    case '\r': out.append("\\r"); break;
                    case '\t': out.append("\\t"); break;
                    default:
                        if (ch < 0x20) out.append(String.format("\\u%04x", (int) ch));
                        else out.append(ch);
                }
            }
            out.append('"');
        } else if (value instanceof Boolean || value instanceof Num || value instanceof Number) {
            out.append(value);
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                if (!first) out.append(',');
                first = false;
                write(String.valueOf(entry.getKey()), out);
                out.append(':');
                write(entry.getValue(), out);
            }
            out.append('}');
        } else if (value instanceof List) {
            out.append('[');
            boolean first = true;
            for (Object item : (List<?>) value) {
                if (!first) out.append(',');
                first = false;
                write(item, out);
            }
            out.append(']');
        } else {
            write(String.valueOf(value), out);
        }
    }

    static Object parse(String text) {
        Parser parser = new Parser(text);
        Object value = parser.value();
        parser.space();
        if (parser.at < text.length()) throw new IllegalArgumentException("trailing data");
        return value;
    }

    private static final class Parser {
        final String text;
        int at;

        Parser(String text) { this.text = text; }

        void space() {
            while (at < text.length() && " \t\r\n".indexOf(text.charAt(at)) >= 0) at++;
        }

        char peek() {
            space();
            if (at >= text.length()) throw new IllegalArgumentException("unexpected end");
            return text.charAt(at);
        }

        void expect(char ch) {
            if (peek() != ch) throw new IllegalArgumentException("expected " + ch + " at " + at);
            at++;
        }

        Object value() {
            char ch = peek();
            if (ch == '{') {
                at++;
                Map<String, Object> map = new LinkedHashMap<>();
                if (peek() == '}') { at++; return map; }
                while (true) {
                    String key = string();
                    expect(':');
                    if (map.put(key, value()) != null) throw new IllegalArgumentException("duplicate " + key);
                    if (peek() == ',') { at++; continue; }
                    expect('}');
                    return map;
                }
            }
            if (ch == '[') {
                at++;
                List<Object> list = new ArrayList<>();
                if (peek() == ']') { at++; return list; }
                while (true) {
                    list.add(value());
                    if (peek() == ',') { at++; continue; }
                    expect(']');
                    return list;
                }
            }
            if (ch == '"') return string();
            if (text.startsWith("true", at)) { at += 4; return Boolean.TRUE; }
            if (text.startsWith("false", at)) { at += 5; return Boolean.FALSE; }
            if (text.startsWith("null", at)) { at += 4; return null; }
            int start = at;
            while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) at++;
            if (start == at) throw new IllegalArgumentException("unexpected " + ch + " at " + at);
            return new Num(text.substring(start, at));
        }

        String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                if (at >= text.length()) throw new IllegalArgumentException("unterminated string");
                char ch = text.charAt(at++);
                if (ch == '"') return out.toString();
                if (ch != '\\') { out.append(ch); continue; }
                char escape = text.charAt(at++);
                switch (escape) {
                    case '"': case '\\': case '/': out.append(escape); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'n': out.append('\n'); break;
                    case 'r': out.append('\r'); break;
                    case 't': out.append('\t'); break;
                    case 'u': out.append((char) Integer.parseInt(text.substring(at, at + 4), 16)); at += 4; break;
                    default: throw new IllegalArgumentException("bad escape \\" + escape);
                }
            }
        }
    }
}
