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
}
