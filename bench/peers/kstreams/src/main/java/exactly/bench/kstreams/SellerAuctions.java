package exactly.bench.kstreams;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * q6's aggregate of a seller: every auction of the seller with a final price, as triples
 * {id, expires, price} in one long[], the table's subtractor taking an auction out before its
 * adder puts its new price in. The row averages the prices of the Q6_AUCTIONS latest (latest
 * expires, then greatest id), as bench/nexmark's SellerAuction.Later orders them.
 */
final class SellerAuctions {
    static final int Q6_AUCTIONS = 10;

    private SellerAuctions() {}

    /** all with auction a ({id, expires, price}) put in, replacing the one of its id. */
    static long[] put(long[] all, long[] a) {
        long[] out = remove(all, a[0]);
        out = Arrays.copyOf(out, out.length + 3);
        System.arraycopy(a, 0, out, out.length - 3, 3);
        return out;
    }

    /** all without the auction of id. */
    static long[] remove(long[] all, long id) {
        for (int i = 0; i < all.length; i += 3) {
            if (all[i] == id) {
                long[] out = new long[all.length - 3];
                System.arraycopy(all, 0, out, 0, i);
                System.arraycopy(all, i + 3, out, i, all.length - i - 3);
                return out;
            }
        }
        return all;
    }

    /** The q6 row of seller: "seller,average,auctions". */
    static byte[] row(long seller, long[] all) {
        int n = all.length / 3;
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        // Latest first: expires descending, then id descending.
        Arrays.sort(order, (x, y) -> all[3 * x + 1] != all[3 * y + 1]
                ? Long.compare(all[3 * y + 1], all[3 * x + 1])
                : Long.compare(all[3 * y], all[3 * x]));
        int k = Math.min(n, Q6_AUCTIONS);
        long sum = 0;
        for (int i = 0; i < k; i++) {
            sum += all[3 * order[i] + 2];
        }
        return (seller + "," + (sum / k) + "," + n).getBytes(StandardCharsets.US_ASCII);
    }
}
