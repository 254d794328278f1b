package streamjoin.oracle;

import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;

/**
 * A table's rows as text: one line per row (UTF-8), fields separated by a tab, {@code \N} for
 * NULL; inside a field {@code \\}, {@code \t}, {@code \n} and {@code \r} stand for a backslash, tab,
 * newline and carriage return. Values are written as FORMAT.md writes them ({@code 12.50},
 * {@code 2021-12-25}, {@code 2021-12-25 00:00:01.5}, {@code true}).
 */
final class SnapshotFile {

    private static final String NULL = "\\N";

    private SnapshotFile() {}

    static List<RowData> read(Path path, RowType rowType) throws IOException {
        List<RowData> rows = new ArrayList<>();
        int width = rowType.getFieldCount();
        for (String line : Files.readAllLines(path, StandardCharsets.UTF_8)) {
            String[] fields = line.split("\t", -1);
            if (fields.length != width) {
                throw new IOException(path + ": a line holds " + fields.length + " fields, the table has "
                        + width + " columns: " + line);
            }
            GenericRowData row = new GenericRowData(width);
            for (int i = 0; i < width; i++) {
                row.setField(i, NULL.equals(fields[i]) ? null : parse(unescape(fields[i]), rowType.getTypeAt(i)));
            }
            rows.add(row);
        }
        return rows;
    }

    private static Object parse(String text, LogicalType type) {
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                return Boolean.parseBoolean(text);
            case TINYINT:
                return Byte.parseByte(text);
            case SMALLINT:
                return Short.parseShort(text);
            case INTEGER:
                return Integer.parseInt(text);
            case BIGINT:
                return Long.parseLong(text);
            case FLOAT:
                return Float.parseFloat(text);
            case DOUBLE:
                return Double.parseDouble(text);
            case CHAR:
            case VARCHAR:
                return StringData.fromString(text);
            case DECIMAL:
                DecimalType decimal = (DecimalType) type;
                return DecimalData.fromBigDecimal(new BigDecimal(text), decimal.getPrecision(), decimal.getScale());
            case DATE:
                return (int) LocalDate.parse(text).toEpochDay();
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return TimestampData.fromLocalDateTime(LocalDateTime.parse(text.replace(' ', 'T')));
            default:
                throw new IllegalArgumentException("snapshot-lookup cannot read a column of type " + type);
        }
    }

    private static String unescape(String field) {
        if (field.indexOf('\\') < 0) {
            return field;
        }
        StringBuilder out = new StringBuilder(field.length());
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            if (c != '\\' || i + 1 == field.length()) {
                out.append(c);
                continue;
            }
            char next = field.charAt(++i);
            out.append(next == 't' ? '\t' : next == 'n' ? '\n' : next == 'r' ? '\r' : next);
        }
        return out.toString();
    }
}
