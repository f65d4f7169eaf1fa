// A sim's states, as the API names them (`cascade_core/sims.py`): the web app's one list of
// them, and of the groups it tells apart. A browser test holds them to the Python ones.

/** Every state, in the order counts show them: what is under way first. */
export const SIM_STATES = ["running", "launching", "pending", "succeeded", "failed", "cancelled"];

/** A sim in one of these never changes again, but by a retry. */
export const FINISHED = new Set(["succeeded", "failed", "cancelled"]);

/** On a runner: its elapsed time ticks. */
export const UNDER_WAY = new Set(["launching", "running"]);

/** What a retry starts again. */
export const RETRIABLE = new Set(["failed", "cancelled"]);
