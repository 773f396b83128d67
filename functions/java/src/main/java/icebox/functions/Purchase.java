package icebox.functions;

import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * purchase (Desiccant's Java set; the purchase transaction of SPECjbb2015, three functions
 * there): customers buy baskets in a simulated supermarket. From {@code seed} come a catalogue of
 * {@code products}, {@code customers} with loyalty tiers, card limits and category coupons, and
 * the store's stock; then {@code transactions} purchases each run the transaction's steps:
 * <ol>
 *   <li>basket: 1 to 12 lines, popular products more likely;</li>
 *   <li>reserve: take the stock (a line is cut to what is left, or dropped when sold out);</li>
 *   <li>price: multi-buy (3 for 2), the week's category specials, the customer's coupon and
 *       loyalty discount, then sales tax by tax class, all in integer cents;</li>
 *   <li>pay: the card limit declines a purchase, which puts the stock back;</li>
 *   <li>record: the receipt goes to headquarters' totals, low stock is reordered from the
 *       supplier.</li>
 * </ol>
 */
public final class Purchase {
    static final String[] CATEGORIES = {"produce", "dairy", "bakery", "meat", "seafood", "frozen",
        "pantry", "beverages", "snacks", "household", "personal care", "baby"};
    static final int[] TAX_BP = {250, 825, 1000}; // food, general goods, alcohol and tobacco
    static final int[] TIER_BP = {0, 200, 500};   // bronze, silver, gold
    static final int COUPON_BP = 1500;
    static final int REORDER_LEVEL = 10;
    static final int REORDER_QUANTITY = 100;

    private Purchase() {}

    record Product(int id, int category, long priceCents, long costCents, int taxClass, boolean multiBuy) {}

    record Receipt(int customer, long totalCents, long taxCents, long discountCents, long items) {}

    static final class Customer {
        final int id;
        final int tier;
        final long cardLimitCents;
        final boolean[] coupons = new boolean[CATEGORIES.length];
        long spentCents;

        Customer(int id, int tier, long cardLimitCents) {
            this.id = id;
            this.tier = tier;
            this.cardLimitCents = cardLimitCents;
        }
    }

    /** Headquarters' view of the run, and the state the tests check invariants on. */
    static final class Report {
        long transactions;
        long completed;
        long declined;
        long lines;
        long droppedLines;
        long cutLines;
        long itemsSold;
        long revenueCents;
        long discountCents;
        long taxCents;
        long receiptsSumCents;
        long receiptsChecksum;
        int topCustomer = -1;
        long topCustomerSpentCents;
        final List<Receipt> receipts = new ArrayList<>();
        long couponsUsed;
        long reorders;
        long unitsReordered;
        long supplierCostCents;
        long initialStock;
        long finalStock;
        final long[] categoryRevenue = new long[CATEGORIES.length];
    }

    public static JsonObject main(JsonObject args) {
        Report r = run(
                Params.integer(args, "products", 5_000, 1, 1_000_000),
                Params.integer(args, "customers", 2_000, 1, 1_000_000),
                Params.integer(args, "transactions", 100_000, 0, 10_000_000),
                Params.longValue(args, "seed", 42, 0, Long.MAX_VALUE));
        int top = 0;
        for (int c = 1; c < CATEGORIES.length; c++) {
            if (r.categoryRevenue[c] > r.categoryRevenue[top]) {
                top = c;
            }
        }
        JsonObject result = new JsonObject();
        result.addProperty("transactions", r.transactions);
        result.addProperty("completed", r.completed);
        result.addProperty("declined", r.declined);
        result.addProperty("lines", r.lines);
        result.addProperty("sold_out_lines", r.droppedLines);
        result.addProperty("cut_lines", r.cutLines);
        result.addProperty("items_sold", r.itemsSold);
        result.addProperty("revenue_cents", r.revenueCents);
        result.addProperty("discount_cents", r.discountCents);
        result.addProperty("tax_cents", r.taxCents);
        result.addProperty("coupons_used", r.couponsUsed);
        result.addProperty("reorders", r.reorders);
        result.addProperty("supplier_cost_cents", r.supplierCostCents);
        result.addProperty("top_category", CATEGORIES[top]);
        result.addProperty("average_receipt_cents", r.completed == 0 ? 0 : r.receiptsSumCents / r.completed);
        result.addProperty("top_customer", r.topCustomer);
        result.addProperty("top_customer_spent_cents", r.topCustomerSpentCents);
        result.addProperty("receipts_checksum", r.receiptsChecksum);
        return result;
    }

    static Report run(int productCount, int customerCount, int transactions, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        Product[] products = new Product[productCount];
        long[] stock = new long[productCount];
        int[] specialBp = new int[CATEGORIES.length];
        for (int c = 0; c < CATEGORIES.length; c++) {
            specialBp[c] = random.nextInt(3) == 0 ? 500 * (1 + random.nextInt(4)) : 0;
        }
        Report report = new Report();
        for (int i = 0; i < productCount; i++) {
            int category = random.nextInt(CATEGORIES.length);
            long price = 49 + random.nextInt(4950);
            int taxClass = category == 7 && random.nextInt(4) == 0 ? 2 : category <= 8 ? 0 : 1;
            products[i] = new Product(i, category, price, price * (55 + random.nextInt(25)) / 100, taxClass,
                    random.nextInt(10) == 0);
            stock[i] = random.nextInt(4 * REORDER_LEVEL);
            report.initialStock += stock[i];
        }
        Customer[] customers = new Customer[customerCount];
        for (int i = 0; i < customerCount; i++) {
            int tier = random.nextInt(10) < 6 ? 0 : random.nextInt(3) < 2 ? 1 : 2;
            customers[i] = new Customer(i, tier, 20_000 + random.nextInt(180) * 1_000L);
            for (int k = random.nextInt(4); k > 0; k--) {
                customers[i].coupons[random.nextInt(CATEGORIES.length)] = true;
            }
        }

        List<long[]> reserved = new ArrayList<>(); // {product, quantity}
        List<Integer> soldOut = new ArrayList<>();
        for (int t = 0; t < transactions; t++) {
            Customer customer = customers[random.nextInt(customerCount)];
            report.transactions++;
            // Basket and reservation.
            reserved.clear();
            soldOut.clear();
            for (int n = 1 + random.nextInt(12); n > 0; n--) {
                double u = random.nextDouble();
                int p = (int) (u * u * productCount); // popular products first
                long want = 1 + random.nextInt(6);
                report.lines++;
                if (stock[p] == 0) {
                    report.droppedLines++;
                    soldOut.add(p);
                    continue;
                }
                long take = Math.min(want, stock[p]);
                if (take < want) {
                    report.cutLines++;
                }
                stock[p] -= take;
                reserved.add(new long[] {p, take});
            }
            // Pricing.
            long total = 0;
            long discount = 0;
            long tax = 0;
            boolean[] couponUsed = new boolean[CATEGORIES.length];
            long[] lineNet = new long[reserved.size()];
            for (int i = 0; i < reserved.size(); i++) {
                Product product = products[(int) reserved.get(i)[0]];
                long qty = reserved.get(i)[1];
                long gross = product.priceCents * qty;
                long off = product.multiBuy ? product.priceCents * (qty / 3) : 0;
                off += basisPoints(gross - off, specialBp[product.category]);
                if (customer.coupons[product.category]) {
                    off += basisPoints(gross - off, COUPON_BP);
                    couponUsed[product.category] = true;
                }
                off += basisPoints(gross - off, TIER_BP[customer.tier]);
                long net = gross - off;
                lineNet[i] = net;
                long lineTax = basisPoints(net, TAX_BP[product.taxClass]);
                discount += off;
                tax += lineTax;
                total += net + lineTax;
            }
            // Payment.
            if (total > customer.cardLimitCents) {
                report.declined++;
                for (long[] line : reserved) {
                    stock[(int) line[0]] += line[1];
                }
                for (int p : soldOut) {
                    reorder(p, products, stock, report);
                }
                continue;
            }
            // Receipt, headquarters' books, coupons spent, reorders.
            report.completed++;
            customer.spentCents += total;
            report.revenueCents += total - tax;
            report.taxCents += tax;
            report.discountCents += discount;
            long items = 0;
            for (int i = 0; i < reserved.size(); i++) {
                Product product = products[(int) reserved.get(i)[0]];
                items += reserved.get(i)[1];
                report.categoryRevenue[product.category] += lineNet[i];
            }
            report.itemsSold += items;
            report.receipts.add(new Receipt(customer.id, total, tax, discount, items));
            for (int c = 0; c < CATEGORIES.length; c++) {
                if (couponUsed[c]) {
                    customer.coupons[c] = false;
                    report.couponsUsed++;
                }
            }
            for (long[] line : reserved) {
                reorder((int) line[0], products, stock, report);
            }
            for (int p : soldOut) {
                reorder(p, products, stock, report);
            }
        }
        for (long s : stock) {
            report.finalStock += s;
        }
        // Headquarters' end-of-day pass over the receipts and the customer accounts.
        for (Receipt receipt : report.receipts) {
            report.receiptsSumCents += receipt.totalCents;
            report.receiptsChecksum = report.receiptsChecksum * 1_000_003 + receipt.totalCents * 31 + receipt.customer;
        }
        for (Customer c : customers) {
            if (c.spentCents > report.topCustomerSpentCents) {
                report.topCustomer = c.id;
                report.topCustomerSpentCents = c.spentCents;
            }
        }
        return report;
    }

    /** The store reorders a product from the supplier when its shelf runs low. */
    private static void reorder(int p, Product[] products, long[] stock, Report report) {
        if (stock[p] < REORDER_LEVEL) {
            stock[p] += REORDER_QUANTITY;
            report.reorders++;
            report.unitsReordered += REORDER_QUANTITY;
            report.supplierCostCents += products[p].costCents * REORDER_QUANTITY;
        }
    }

    /** amount * bp / 10000, rounded half up, as a till rounds cents. */
    static long basisPoints(long amount, int bp) {
        return (amount * bp + 5_000) / 10_000;
    }
}
