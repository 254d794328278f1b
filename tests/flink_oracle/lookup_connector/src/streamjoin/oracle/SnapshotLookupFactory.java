package streamjoin.oracle;

import java.util.Set;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.factories.DynamicTableSourceFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.logical.RowType;

/**
 * The {@code snapshot-lookup} connector: a table that serves lookups from a snapshot file.
 *
 * <pre>CREATE TABLE d (k INT, w STRING) WITH ('connector' = 'snapshot-lookup', 'path' = '/tmp/d.tsv')</pre>
 *
 * <p>The file holds the table's rows in the format {@link SnapshotFile} reads. It serves lookups only
 * (no scan), so Flink can join it by processing time: {@code JOIN d FOR SYSTEM_TIME AS OF p.pt}.
 */
public final class SnapshotLookupFactory implements DynamicTableSourceFactory {

    public static final ConfigOption<String> PATH =
            ConfigOptions.key("path").stringType().noDefaultValue()
                    .withDescription("the snapshot file the table's lookups read");

    @Override
    public String factoryIdentifier() {
        return "snapshot-lookup";
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return Set.of(PATH);
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        return Set.of();
    }

    @Override
    public DynamicTableSource createDynamicTableSource(Context context) {
        FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
        helper.validate();
        RowType rowType = (RowType) context.getPhysicalRowDataType().getLogicalType();
        return new SnapshotLookupSource(helper.getOptions().get(PATH), rowType);
    }
}
