package streamjoin.oracle;

import java.io.IOException;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;

import org.apache.flink.table.data.RowData;
import org.apache.flink.table.functions.FunctionContext;
import org.apache.flink.table.functions.LookupFunction;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;

/**
 * Returns every row of the snapshot file whose key columns equal the lookup key (one row per copy
 * the file holds). Flink passes the key's fields in the order of {@code keyFields}; a NULL key
 * field matches nothing. The file is read when the function opens: one job, one snapshot.
 */
public final class SnapshotLookupFunction extends LookupFunction {

    private static final long serialVersionUID = 1L;

    private final String path;
    private final RowType rowType;
    private final int[] keyFields;
    private transient List<RowData> rows;
    private transient RowData.FieldGetter[] rowKey;
    private transient RowData.FieldGetter[] lookupKey;

    public SnapshotLookupFunction(String path, RowType rowType, int[] keyFields) {
        this.path = path;
        this.rowType = rowType;
        this.keyFields = keyFields;
    }

    @Override
    public void open(FunctionContext context) throws Exception {
        rows = SnapshotFile.read(Paths.get(path), rowType);
        rowKey = new RowData.FieldGetter[keyFields.length];
        lookupKey = new RowData.FieldGetter[keyFields.length];
        for (int i = 0; i < keyFields.length; i++) {
            LogicalType type = rowType.getTypeAt(keyFields[i]);
            rowKey[i] = RowData.createFieldGetter(type, keyFields[i]);
            lookupKey[i] = RowData.createFieldGetter(type, i);
        }
    }

    @Override
    public Collection<RowData> lookup(RowData key) throws IOException {
        List<RowData> found = new ArrayList<>();
        for (RowData row : rows) {
            if (matches(row, key)) {
                found.add(row);
            }
        }
        return found;
    }

    private boolean matches(RowData row, RowData key) {
        for (int i = 0; i < keyFields.length; i++) {
            Object wanted = lookupKey[i].getFieldOrNull(key);
            if (wanted == null || !Objects.equals(wanted, rowKey[i].getFieldOrNull(row))) {
                return false;
            }
        }
        return true;
    }
}
