import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The lock-harness client protocol (docs/clients.md), for Java programs: JSON lines, one hello,
 * then one request at a time on stdin, one answer each on stdout; logs go to stderr. stdin's
 * end means the harness is done with us: exit at once. Requests are handled on the main thread
 * (Curator's InterProcessMutex belongs to the thread that acquired it). A small JSON reader and
 * writer of our own, so that the client needs no jar beyond Curator's.
 */
final class Protocol {
    interface Client {
        Map<String, Object> describe();

        Map<String, Object> handle(String op, Map<String, Object> request) throws Exception;
    }

    interface Starter {
        Client start(Map<String, Object> hello) throws Exception;
    }

    static Map<String, Object> reply(String type, Object... fields) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("type", type);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            out.put((String) fields[i], fields[i + 1]);
        }
        return out;
    }

    static void log(String line) {
        System.err.println("[curator " + ProcessHandle.current().pid() + "] " + line);
    }

    @SuppressWarnings("unchecked")
    static void serve(Starter starter) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err); // nothing but the protocol on stdout, whatever a library prints
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        if (line == null) {
            System.exit(0);
        }
        Client client;
        try {
            client = starter.start((Map<String, Object>) new Reader(line).value());
        } catch (Exception e) {
            out.println(write(reply("fail", "error", String.valueOf(e))));
            System.exit(1);
            return;
        }
        Map<String, Object> hello = client.describe();
        hello.put("type", "ok");
        out.println(write(hello));
        while ((line = in.readLine()) != null) {
            Map<String, Object> request;
            try {
                request = (Map<String, Object>) new Reader(line).value();
            } catch (RuntimeException e) {
                log("not JSON, ignored: " + line);
                continue;
            }
            Map<String, Object> answer;
            try {
                answer = client.handle(String.valueOf(request.get("op")), request);
            } catch (Exception e) { // we cannot tell what happened
                answer = reply("info", "error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            answer.put("id", request.get("id"));
            out.println(write(answer));
        }
        System.exit(0);
    }

    // JSON ------------------------------------------------------------------------------------
    static String write(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    private static void write(StringBuilder b, Object v) {
        if (v == null || v instanceof Boolean || v instanceof Number) {
            b.append(v);
        } else if (v instanceof Map) {
            b.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                b.append(sep);
                write(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
                sep = ",";
            }
            b.append('}');
        } else if (v instanceof List) {
            b.append('[');
            String sep = "";
            for (Object o : (List<?>) v) {
                b.append(sep);
                write(b, o);
                sep = ",";
            }
            b.append(']');
        } else {
            b.append('"');
            for (char c : v.toString().toCharArray()) {
                if (c == '"' || c == '\\') {
                    b.append('\\').append(c);
                } else if (c < 0x20) {
                    b.append(String.format("\\u%04x", (int) c));
                } else {
                    b.append(c);
                }
            }
            b.append('"');
        }
    }

    /** Objects, arrays, strings, numbers (Long or Double), true, false, null. */
    static final class Reader {
        private final String s;
        private int i;

        Reader(String s) {
            this.s = s;
        }

        Object value() {
            skip();
            if (i >= s.length()) {
                throw new IllegalArgumentException("unexpected end");
            }
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                skip();
                if (s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    skip();
                    String k = (String) value();
                    skip();
                    expect(':');
                    m.put(k, value());
                    skip();
                    if (s.charAt(i++) == '}') {
                        return m;
                    }
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                skip();
                if (s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    skip();
                    if (s.charAt(i++) == ']') {
                        return l;
                    }
                }
            }
            if (c == '"') {
                StringBuilder b = new StringBuilder();
                i++;
                while ((c = s.charAt(i++)) != '"') {
                    if (c == '\\') {
                        c = s.charAt(i++);
                        switch (c) {
                            case 'n': b.append('\n'); break;
                            case 't': b.append('\t'); break;
                            case 'r': b.append('\r'); break;
                            case 'b': b.append('\b'); break;
                            case 'f': b.append('\f'); break;
                            case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                            default: b.append(c);
                        }
                    } else {
                        b.append(c);
                    }
                }
                return b.toString();
            }
            for (String word : new String[] {"true", "false", "null"}) {
                if (s.startsWith(word, i)) {
                    i += word.length();
                    return word.equals("null") ? null : Boolean.valueOf(word);
                }
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String n = s.substring(start, i);
            if (n.isEmpty()) {
                throw new IllegalArgumentException("bad JSON at " + start);
            }
            return n.matches("-?\\d+") ? (Object) Long.valueOf(n) : (Object) Double.valueOf(n);
        }

        private void skip() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private void expect(char c) {
            if (s.charAt(i++) != c) {
                throw new IllegalArgumentException("expected " + c + " at " + (i - 1));
            }
        }
    }
}
