package icebox.functions;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;

/**
 * Reads the small invocation parameters of the functions: a missing or null value takes its
 * default; anything else must be a number (or a string holding one, as command-line tools
 * send) inside the allowed range, or the invocation fails with a message naming the parameter.
 */
final class Params {
    private Params() {}

    static int integer(JsonObject args, String name, int dflt, int min, int max) {
        return (int) longValue(args, name, dflt, min, max);
    }

    static long longValue(JsonObject args, String name, long dflt, long min, long max) {
        JsonPrimitive p = primitive(args, name);
        if (p == null) {
            return dflt;
        }
        long v;
        try {
            v = p.isNumber() ? p.getAsBigDecimal().longValueExact() : Long.parseLong(p.getAsString().trim());
        } catch (ArithmeticException | NumberFormatException e) {
            throw invalid(name, "an integer", min, max, p);
        }
        if (v < min || v > max) {
            throw invalid(name, "an integer", min, max, p);
        }
        return v;
    }

    static double real(JsonObject args, String name, double dflt, double min, double max) {
        JsonPrimitive p = primitive(args, name);
        if (p == null) {
            return dflt;
        }
        double v;
        try {
            v = p.isNumber() ? p.getAsDouble() : Double.parseDouble(p.getAsString().trim());
        } catch (NumberFormatException e) {
            throw invalid(name, "a number", min, max, p);
        }
        if (!(v >= min && v <= max)) {
            throw invalid(name, "a number", min, max, p);
        }
        return v;
    }

    static String string(JsonObject args, String name, String dflt) {
        JsonPrimitive p = primitive(args, name);
        return p == null ? dflt : p.getAsString();
    }

    private static JsonPrimitive primitive(JsonObject args, String name) {
        JsonElement e = args == null ? null : args.get(name);
        if (e == null || e.isJsonNull()) {
            return null;
        }
        if (!e.isJsonPrimitive() || e.getAsJsonPrimitive().isBoolean()) {
            throw new IllegalArgumentException(name + " must be a number or a string, got " + e);
        }
        return e.getAsJsonPrimitive();
    }

    private static IllegalArgumentException invalid(String name, String what, Object min, Object max,
            JsonPrimitive got) {
        return new IllegalArgumentException(name + " must be " + what + " in [" + min + ", " + max
                + "], got " + got);
    }
}
