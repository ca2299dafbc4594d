package conformance;

import java.util.List;

/**
 * The conformance scenarios of stream-stream windowed joins, registered with {@link Main#add} and mirrored in
 * kstreamtest. Their input topics are this family's own, so that no other scenario's input
 * changes.
 */
final class StreamJoinScenarios {
    private StreamJoinScenarios() {}

    /** Registers the scenarios, in the order of the Go side. */
    static void scenarios() {}

    /** The records of this family's input topics, piped after Main's own. */
    static List<Main.In> input() {
        return List.of();
    }
}
