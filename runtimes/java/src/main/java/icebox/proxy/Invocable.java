package icebox.proxy;

import com.google.gson.JsonObject;

/** What /run calls: one loaded action, or the shared mode's pool of them. */
interface Invocable {
    /**
     * @return whatever the user code returned, possibly null or not a JsonObject
     * @throws Throwable what the user code threw, unwrapped, or an {@link InitException} when
     *     the shared mode could not load the action into a new slot
     */
    Object invoke(JsonObject args) throws Throwable;

    /**
     * /icebox/restored: calls the action's {@code public static void iceboxRestored()} in every
     * copy of the action loaded so far, if it has one.
     *
     * @return whether the action has the hook
     * @throws Throwable what the hook threw, unwrapped, or an {@link InitException} when the
     *     action's {@code iceboxRestored} cannot be called (not static)
     */
    boolean restored() throws Throwable;
}
