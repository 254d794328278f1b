package streamjoin.oracle;

import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.connector.source.LookupTableSource;
import org.apache.flink.table.connector.source.lookup.LookupFunctionProvider;
import org.apache.flink.table.types.logical.RowType;

/** A lookup-only table source over a snapshot file (see {@link SnapshotLookupFactory}). */
public final class SnapshotLookupSource implements LookupTableSource {

    private final String path;
    private final RowType rowType;

    public SnapshotLookupSource(String path, RowType rowType) {
        this.path = path;
        this.rowType = rowType;
    }

    @Override
    public LookupRuntimeProvider getLookupRuntimeProvider(LookupContext context) {
        int[][] keys = context.getKeys();
        int[] keyFields = new int[keys.length];
        for (int i = 0; i < keys.length; i++) {
            if (keys[i].length != 1) {
                throw new IllegalArgumentException("snapshot-lookup looks rows up by top-level columns only");
            }
            keyFields[i] = keys[i][0];
        }
        return LookupFunctionProvider.of(new SnapshotLookupFunction(path, rowType, keyFields));
    }

    @Override
    public DynamicTableSource copy() {
        return new SnapshotLookupSource(path, rowType);
    }

    @Override
    public String asSummaryString() {
        return "snapshot-lookup(" + path + ")";
    }
}
